"""DDP communication hooks (``torch.distributed.algorithms.ddp_comm_hooks``)."""

from . import default_hooks  # noqa: F401
from .default_hooks import allreduce_hook, fp16_compress_hook  # noqa: F401
