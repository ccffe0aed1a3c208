"""``ndgrad.special``: special functions (registered under ``special``, plus PyTorch's aliases)."""

from ._ops.registry import NAMESPACES as _NS
from ._ops.registry import OPS as _OPS

globals().update(_NS["special"])
erf = _OPS["erf"].call
erfc = _OPS["erfc"].call
expit = _OPS["sigmoid"].call
logit = _OPS["logit"].call
expm1 = _OPS["expm1"].call
exp2 = _OPS["exp2"].call
log1p = _OPS["log1p"].call
gammaln = _OPS["lgamma"].call
digamma = psi = _OPS["digamma"].call
polygamma = _OPS["polygamma"].call
erfinv = _OPS["erfinv"].call
