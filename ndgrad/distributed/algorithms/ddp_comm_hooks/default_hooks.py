"""The built-in DDP communication hooks: each takes ``(process_group, bucket)`` and returns a
``Future`` of the bucket's reduced flat buffer, as ``register_comm_hook`` expects."""

from __future__ import annotations

from ... import distributed_c10d as c10d


def allreduce_hook(process_group, bucket):
    """Average the bucket across the group: divide by the group's size, all-reduce in place."""
    group = process_group if process_group is not None else c10d.group.WORLD
    buf = bucket.buffer()
    buf.div_(c10d.get_world_size(group))
    work = c10d.all_reduce(buf, group=group, async_op=True)
    return work.get_future().then(lambda fut: fut.value()[0])


def fp16_compress_hook(process_group, bucket):
    """All-reduce the bucket in float16 (half the bytes), then write it back in its own dtype."""
    from ...._dtype import float16
    group = process_group if process_group is not None else c10d.group.WORLD
    buf = bucket.buffer()
    compressed = buf.to(float16).div_(c10d.get_world_size(group))
    work = c10d.all_reduce(compressed, group=group, async_op=True)

    def decompress(fut):
        out = bucket.buffer()
        out.copy_(fut.value()[0])
        return out
    return work.get_future().then(decompress)
