"""``ndgrad.utils.data``: datasets, samplers and the ``DataLoader`` (``torch.utils.data``'s API)."""

from .dataloader import DataLoader, default_collate, default_convert, get_worker_info  # noqa: F401
from .dataset import (  # noqa: F401
    ChainDataset, ConcatDataset, Dataset, IterableDataset, StackDataset, Subset, TensorDataset,
    random_split,
)
from . import distributed  # noqa: F401
from .distributed import DistributedSampler
from .sampler import (  # noqa: F401
    BatchSampler, RandomSampler, Sampler, SequentialSampler, SubsetRandomSampler,
    WeightedRandomSampler,
)

__all__ = [
    "BatchSampler", "ChainDataset", "ConcatDataset", "DataLoader", "Dataset", "DistributedSampler",
    "IterableDataset", "RandomSampler", "Sampler", "SequentialSampler", "StackDataset", "Subset",
    "SubsetRandomSampler", "TensorDataset", "WeightedRandomSampler", "default_collate",
    "default_convert", "get_worker_info", "random_split",
]
