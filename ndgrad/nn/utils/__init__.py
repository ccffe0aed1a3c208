"""``nn.utils``: gradient clipping, parameter/vector conversion, weight norm (hook form) and
parametrizations (``parametrize``, ``parametrizations``)."""

from . import clip_grad  # noqa: F401
from . import rnn  # noqa: F401
from .clip_grad import clip_grad_norm, clip_grad_norm_, clip_grad_value_  # noqa: F401
from .clip_grad import clip_grads_with_norm_, get_total_norm  # noqa: F401
from .convert_parameters import parameters_to_vector, vector_to_parameters  # noqa: F401
from .weight_norm import remove_weight_norm, weight_norm  # noqa: F401
from . import parametrizations, parametrize  # noqa: F401
