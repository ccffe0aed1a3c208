"""ndgrad.testing against torch.testing: the same inputs give the same errors and messages."""

import math

import numpy as np
import pytest

import ndgrad
from ndgrad.testing import assert_close, make_tensor

torch = pytest.importorskip("torch")


def _outcome(lib, build, kwargs):
    try:
        actual, expected = build(lib)
        lib.testing.assert_close(actual, expected, **kwargs)
    except Exception as e:  # noqa: BLE001
        # ndgrad.Tensor's class lives in ndgrad._tensor (torch.Tensor reports module "torch")
        text = str(e).replace("ndgrad._tensor.Tensor", "torch.Tensor")
        return type(e).__name__, text.replace("ndgrad.", "torch.")
    return None


def T(lib, *a, **k):
    if "dtype" in k and isinstance(k["dtype"], str):
        k["dtype"] = getattr(lib, k["dtype"])
    return lib.tensor(*a, **k)


CASES = {
    "close_1d": (lambda L: (T(L, [1.0, 2.0, 3.0]), T(L, [1.0, 2.5, 3.0]))),
    "close_2d": (lambda L: (T(L, [[1.0, 2.0], [3, 4]]), T(L, [[1.0, 2.0], [3, 5]]))),
    "equal_ints": (lambda L: (T(L, [1, 2, 3]), T(L, [1, 2, 4]))),
    "equal_uint8": (lambda L: (T(L, [1, 2], dtype="uint8"), T(L, [2, 1], dtype="uint8"))),
    "bools": (lambda L: (T(L, [True, False]), T(L, [True, True]))),
    "dtype": (lambda L: (T(L, [1.0, 2.0]), T(L, [1.0, 2.0], dtype="float64"))),
    "shape": (lambda L: (T(L, [1.0, 2.0]), T(L, [1.0, 2.0, 3.0]))),
    "zero_d": (lambda L: (T(L, 1.0), T(L, 2.0))),
    "zero_d_int": (lambda L: (T(L, 1), T(L, 2))),
    "zero_d_frac": (lambda L: (T(L, 1.5), T(L, 2.5))),
    "nan": (lambda L: (T(L, [math.nan]), T(L, [math.nan]))),
    "nan_mixed": (lambda L: (T(L, [1.0, math.nan]), T(L, [2.0, math.nan]))),
    "inf": (lambda L: (T(L, [1.0, math.inf]), T(L, [1.0, -math.inf]))),
    "inf_same": (lambda L: (T(L, [1.0, math.inf]), T(L, [1.0, math.inf]))),
    "rel_inf": (lambda L: (T(L, [1.0, 2.0]), T(L, [0.0, 0.0]))),
    "small_abs": (lambda L: (T(L, [0.0, 0.0]), T(L, [1e-6, 0.0]))),
    "float16": (lambda L: (T(L, [1.0, 2.0], dtype="float16"), T(L, [1.0, 2.01], dtype="float16"))),
    "float16_ok": (
        lambda L: (T(L, [1.0, 2.0], dtype="float16"), T(L, [1.0, 2.001], dtype="float16"))
    ),
    "complex": (lambda L: (T(L, [1 + 1j]), T(L, [1 + 2j]))),
    "numpy": (lambda L: (np.array([1.0, 2.0]), np.array([1.0, 3.0]))),
    "numpy_dtype": (lambda L: (np.array([1, 2]), np.array([1, 2.0]))),
    "numpy_vs_tensor": (lambda L: (np.array([1.0, 2.0]), T(L, [1.0, 2.0], dtype="float64"))),
    "tensor_vs_list": (lambda L: (T(L, [1.0, 2.0]), [1.0, 2.0])),
    "tensor_vs_float": (lambda L: (T(L, 1.0), 1.0)),
    "seq_items": (lambda L: ([T(L, 1.0), T(L, 2.0)], [T(L, 1.0), T(L, 3.0)])),
    "seq_tensor": (lambda L: ([T(L, [1.0, 2.0])], [T(L, [1.0, 3.0])])),
    "seq_shape": (lambda L: ([T(L, [1.0])], [T(L, [1.0, 2.0])])),
    "seq_len": (lambda L: ([1, 2], [1, 2, 3])),
    "seq_len_first": (lambda L: ([1, [1, 2]], [2, [1]])),
    "tuple_list": (lambda L: ((1, 2), [1, 2])),
    "nested": (
        lambda L: ([T(L, [1.0, 2.0]), {"x": (T(L, 1),)}], [T(L, [1.0, 2.0]), {"x": (T(L, 2),)}])
    ),
    "map_value": (lambda L: ({"a": T(L, 1.0)}, {"a": T(L, 3.0)})),
    "map_sorted": (lambda L: ({"b": 1, "a": 1}, {"b": 2, "a": 2})),
    "map_keys": (lambda L: ({"a": 1, "c": 2}, {"a": 1, "b": 2, "d": 3})),
    "map_missing": (lambda L: ({"a": 1}, {"a": 1, "b": 2})),
    "ints": (lambda L: (1, 2)),
    "floats_ok": (lambda L: (1.0, 1.0 + 1e-9)),
    "int_float": (lambda L: (1, 1.0)),
    "float_zero": (lambda L: (1.0, 0.0)),
    "scalar_nan": (lambda L: (math.nan, 1.0)),
    "complex_scalars": (lambda L: (1 + 1j, 1 + 2j)),
    "np_scalars": (lambda L: (np.float32(1.0), np.float32(2.0))),
    "np_float64": (lambda L: (np.float64(1.0), 1.0)),
    "bool_scalars": (lambda L: (True, False)),
    "np_bool": (lambda L: (np.bool_(True), False)),
    "strings": (lambda L: ("a", "b")),
    "none": (lambda L: (None, None)),
    "none_int": (lambda L: (None, 1)),
    "list_int": (lambda L: ([1], 1)),
    "empty": (lambda L: (L.empty(0), L.empty(0))),
    "requires_grad": (lambda L: (T(L, [1.0, 2.0], requires_grad=True), T(L, [1.0, 2.0]))),
    "bool_vs_int": (lambda L: (T(L, [True]), T(L, [1]))),
}

KWARGS = {
    "nan_equal": ("nan", {"equal_nan": True}),
    "msg_str": ("close_1d", {"msg": "custom"}),
    "msg_str_seq": ("seq_tensor", {"msg": "boom"}),
    "msg_callable": ("seq_tensor", {"msg": lambda m: "X" + m + "!!"}),
    "only_rtol": ("close_1d", {"rtol": 0.1}),
    "only_atol": ("close_1d", {"atol": 1}),
    "exact": ("small_abs", {"rtol": 0, "atol": 0}),
    "loose": ("close_1d", {"rtol": 0, "atol": 0.6}),
    "no_dtype_check": ("dtype", {"check_dtype": False}),
    "no_dtype_promote": (
        lambda L: (T(L, [1.0, 2.0]), T(L, [1.0, 2.1], dtype="float64")),
        {"check_dtype": False},
    ),
    "no_dtype_int": (
        lambda L: (T(L, [1, 2], dtype="float32"), T(L, [1, 3])),
        {"check_dtype": False},
    ),
    "stride": (lambda L: (L.zeros(2, 3), L.zeros(3, 2).t()), {"check_stride": True}),
    "stride_same": (lambda L: (L.zeros(2, 3), L.zeros(2, 3)), {"check_stride": True}),
}


@pytest.mark.parametrize("name", list(CASES))
def test_matches_torch(name):
    build = CASES[name]
    assert _outcome(ndgrad, build, {}) == _outcome(torch, build, {})


@pytest.mark.parametrize("name", list(KWARGS))
def test_matches_torch_with_options(name):
    build, kwargs = KWARGS[name]
    if isinstance(build, str):
        build = CASES[build]
    assert _outcome(ndgrad, build, kwargs) == _outcome(torch, build, kwargs)


def test_message_format():
    with pytest.raises(AssertionError) as info:
        assert_close(ndgrad.tensor([1.0, 2.0, 3.0]), ndgrad.tensor([1.0, 2.5, 3.0]))
    assert str(info.value) == (
        "Tensor-likes are not close!\n\nMismatched elements: 1 / 3 (33.3%)\n"
        "Greatest absolute difference: 0.5 at index (1,) (up to 1e-05 allowed)\n"
        "Greatest relative difference: 0.20000000298023224 at index (1,) (up to 1.3e-06 allowed)"
    )


def test_subclasses():
    p = ndgrad.nn.Parameter(ndgrad.ones(1))
    assert_close(p, ndgrad.ones(1))
    with pytest.raises(TypeError, match="No comparison pair was able to handle inputs of type"):
        assert_close(p, ndgrad.ones(1), allow_subclasses=False)


def test_make_tensor():
    t = make_tensor((2, 3), dtype=ndgrad.float32, device="cpu")
    assert tuple(t.shape) == (2, 3) and t.dtype == ndgrad.float32
    assert bool((t >= -9).all()) and bool((t < 9).all())
    assert tuple(make_tensor(2, 3, dtype=ndgrad.float64, device="cpu").shape) == (2, 3)
    assert tuple(make_tensor((), dtype=ndgrad.float32, device="cpu").shape) == ()
    i = make_tensor((1000,), dtype=ndgrad.int64, device="cpu", low=0, high=5)
    assert i.dtype == ndgrad.int64 and set(i.numpy().tolist()) == {0, 1, 2, 3, 4}
    u = make_tensor((1000,), dtype=ndgrad.uint8, device="cpu")
    assert u.numpy().min() >= 0 and u.numpy().max() < 10
    b = make_tensor((100,), dtype=ndgrad.bool, device="cpu")
    assert b.dtype == ndgrad.bool and set(b.numpy().tolist()) == {False, True}
    c = make_tensor((4,), dtype=ndgrad.complex64, device="cpu")
    assert c.dtype == ndgrad.complex64 and np.abs(c.numpy().imag).max() > 0
    n = make_tensor((3, 4), dtype=ndgrad.float32, device="cpu", noncontiguous=True)
    assert not n.is_contiguous() and tuple(n.shape) == (3, 4)
    assert (
        n.stride()
        == torch.testing.make_tensor(
            (3, 4), dtype=torch.float32, device="cpu", noncontiguous=True
        ).stride()
    )
    assert make_tensor((3,), dtype=ndgrad.float32, device="cpu", requires_grad=True).requires_grad
    z = make_tensor((1000,), dtype=ndgrad.int64, device="cpu", low=-1, high=2, exclude_zero=True)
    assert (z.numpy() != 0).all()
    for kw in ({"low": 3, "high": 1}, {"low": math.nan}):
        with pytest.raises(ValueError) as got:
            make_tensor((2,), dtype=ndgrad.float32, device="cpu", **kw)
        with pytest.raises(ValueError) as want:
            torch.testing.make_tensor((2,), dtype=torch.float32, device="cpu", **kw)
        assert str(got.value) == str(want.value)
