"""``ndgrad.nn.parallel``: ``DataParallel`` and ``DistributedDataParallel`` (``torch.nn.parallel``).

``DistributedDataParallel`` is loaded on first use: its module imports ``ndgrad.distributed``
(and so MPI), which ``import ndgrad`` should not pay for.
"""

from .data_parallel import DataParallel

__all__ = ["DataParallel", "DistributedDataParallel"]


def __getattr__(name: str):
    if name == "DistributedDataParallel":
        from .distributed import DistributedDataParallel

        globals()[name] = DistributedDataParallel
        return DistributedDataParallel
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
