"""``ndgrad.distributed``: process groups and collectives with ``torch.distributed``'s API, on an
existing collective library: MPI (mpi4py) for CPU tensors, NCCL (CuPy) for CUDA tensors.

Start a job with ``python -m ndgrad.distributed.run --nproc-per-node N train.py`` (torchrun's
flags), ``mpiexec -n N python train.py`` or a scheduler's ``srun --mpi=pmix``. A process started
by an MPI launcher gets torchrun's variables (``RANK``, ``LOCAL_RANK``, ``WORLD_SIZE``, ...) when
this package is imported, so scripts that read them first run unchanged.
"""

from . import _mpi
from ._reducer import DEFAULT_FIRST_BUCKET_BYTES as _DEFAULT_FIRST_BUCKET_BYTES  # noqa: F401
from ._reducer import GradBucket, Reducer
from ._reducer import (  # noqa: F401 - torch spells it dist._compute_bucket_assignment_by_size
    compute_bucket_assignment_by_size as _compute_bucket_assignment_by_size,
)
from .distributed_c10d import *
from .distributed_c10d import __all__ as _c10d_all

_mpi.export_torchrun_env()

__all__ = list(_c10d_all) + ["GradBucket", "Reducer"]
