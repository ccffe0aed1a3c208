"""The op-info table holds every op the core issue lists, each with samples, so none drops out
of the generic tests silently."""

from __future__ import annotations

import pytest

import ndgrad as nd
from ndgrad._ops.registry import OPS

POINTWISE = """add sub mul div neg pow exp exp2 log log2 log1p expm1 sqrt rsqrt abs sign sin cos tan
asin acos atan atan2 sinh cosh tanh sigmoid logit relu gelu silu elu leaky_relu softplus erf erfc
clamp minimum maximum where lerp reciprocal hypot floor ceil round trunc frac fmod remainder eq ne lt
le gt ge logical_and logical_or logical_xor logical_not""".split()
REDUCE = """sum mean prod max min amax amin var std norm vector_norm logsumexp cumsum cumprod softmax
log_softmax argmax argmin all any""".split()
LINALG = "matmul mm bmm addmm dot outer einsum inv det slogdet solve cholesky qr svdvals".split()
SHAPE = """view reshape flatten unflatten squeeze unsqueeze permute transpose t expand narrow select
unbind split chunk movedim cat stack repeat tile flip roll gather scatter scatter_add index_select
index_add masked_fill masked_select pad tril triu diagonal diag_embed""".split()
INPLACE = "add_ mul_ sub_ div_ zero_ fill_ copy_ clamp_ relu_ masked_fill_".split()

# Where the op lives in the public API, when not ndgrad.<name>.
WHERE = {"vector_norm": "linalg", "inv": "linalg", "slogdet": "linalg", "solve": "linalg",
         "cholesky": "linalg", "qr": "linalg", "svdvals": "linalg", "pad": "nn.functional",
         "gelu": "nn.functional", "silu": "nn.functional", "elu": "nn.functional",
         "leaky_relu": "nn.functional", "softplus": "nn.functional"}
# Ops that only exist as Tensor methods in PyTorch.
METHOD_ONLY = {"view", "expand", "repeat"}


def _public(name):
    if name in METHOD_ONLY:
        return getattr(nd.Tensor, name, None)
    mod = nd
    for part in WHERE.get(name, "").split("."):
        if part:
            mod = getattr(mod, part)
    return getattr(mod, name, None)


def _records(name):
    return [r for key, r in OPS.items() if key.split(".")[0] in (name, "_" + name, "linalg_" + name) and r.samples]


@pytest.mark.parametrize("name", POINTWISE + REDUCE + LINALG + SHAPE)
def test_listed_op_is_public_and_in_table(name):
    assert callable(_public(name)), f"{name} is not in the public API"
    assert _records(name), f"{name} has no record with samples in the op-info table"


@pytest.mark.parametrize("name", INPLACE)
def test_listed_inplace_method(name):
    assert callable(getattr(nd.Tensor, name, None))


def test_indexing_records():
    for key in ("__getitem__", "slice.Tensor", "select.int", "alias", "index.Tensor", "index_put"):
        assert OPS[key].samples, key


def test_table_size():
    # Update deliberately when adding or removing ops: a drop here means an op fell out.
    with_samples = sum(1 for r in OPS.values() if r.samples)
    assert with_samples == 478, with_samples
