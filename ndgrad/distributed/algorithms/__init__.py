"""``ndgrad.distributed.algorithms``: communication hooks for ``DistributedDataParallel``."""

from . import ddp_comm_hooks  # noqa: F401
