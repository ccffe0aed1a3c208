"""The ops layer: every differentiable operator, each defined once (see ``registry.py``).

Importing this package registers all ops in ``registry.OPS`` (the op-info table), attaches
their methods to ``Tensor`` and fills ``registry.NAMESPACES`` for ``ndgrad``'s public modules.
"""

from . import pointwise, reduce, shape, index, linalg, nn  # noqa: F401  (order: composites use the others)
from . import conv, norm, loss, ctc  # noqa: F401
from . import rnn  # noqa: F401
from . import factory, sorting, random  # noqa: F401
from . import composite  # noqa: F401
from . import arrange, products, numeric, scatter  # noqa: F401  (torch.* stacks, products, numerics, scatters)
from . import fft  # noqa: F401  (torch.fft: c2c, r2c, c2r and the composites on them)
from . import lu  # noqa: F401  (the LU family: getrf on arrays, PyTorch's gradients)
from .registry import NAMESPACES, OPS, dispatch, pop_mode, push_mode  # noqa: F401
