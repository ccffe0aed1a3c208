"""Anomaly mode against PyTorch: the flags, the enabling warning, forward tracebacks in node
metadata, the warnings of a failing backward (with nested-backward parents), the NaN check, and
that the dispatch mode leaves the registry's mode stack when the context exits.

Tracebacks are compared on this file's frames only: ndgrad leaves out its own frames (PyTorch's
dispatch is C++), and each side is called from a different line of the oracle.
"""

from __future__ import annotations

import re
import warnings

import numpy as np
import pytest

import ndgrad
from ndgrad._ops.registry import _modes

ENABLED = (
    "Anomaly Detection has been enabled. This mode will increase the runtime and should only be "
    "enabled for debugging."
)
_FRAME = re.compile(r'  File "(?P<file>[^"]+)", line (?P<line>\d+), in (?P<fn>[^\n]+)\n(?P<code>    [^\n]*\n)?')


def _ours(stack: str) -> str:
    """The frames of this file in a formatted stack."""
    return "".join(m.group(0) for m in _FRAME.finditer(stack) if m["file"] == __file__)


def _norm_warning(msg: str) -> str:
    msg = re.sub(r" \(Triggered internally at [^)]*\)$", "", msg)
    head, sep, stack = msg.partition(":\n")
    return head + sep + _ours(stack) if sep else msg


def _backward_report(T, fn):
    """Run ``fn`` (which raises in backward) under anomaly mode: (error type, message, warnings)."""
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        with np.errstate(all="ignore"), T.autograd.detect_anomaly():
            try:
                fn()
            except Exception as e:  # noqa: BLE001 - the error is what is compared
                err = (type(e).__name__, str(e))
            else:
                err = None
    msgs = [_norm_warning(str(x.message)) for x in w
            if issubclass(x.category, UserWarning) and str(x.message) != ENABLED]
    return err, msgs


@pytest.fixture(autouse=True)
def _clean():
    yield
    assert not _modes
    assert not ndgrad.autograd.is_anomaly_enabled()
    assert ndgrad.autograd.is_anomaly_check_nan_enabled()


# --- flags ---
def test_flags(ref):
    def f(T):
        A = T.autograd
        # torch has the getters at top level only; ndgrad has them in ndgrad.autograd too
        G = A if T is ndgrad else T
        out = [G.is_anomaly_enabled(), G.is_anomaly_check_nan_enabled()]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            with A.detect_anomaly(check_nan=False):
                out += [G.is_anomaly_enabled(), G.is_anomaly_check_nan_enabled()]
                with A.set_detect_anomaly(False):
                    out += [G.is_anomaly_enabled(), G.is_anomaly_check_nan_enabled()]
                out += [G.is_anomaly_enabled(), G.is_anomaly_check_nan_enabled()]
                with A.detect_anomaly():
                    out += [G.is_anomaly_enabled(), G.is_anomaly_check_nan_enabled()]
                out += [G.is_anomaly_enabled(), G.is_anomaly_check_nan_enabled()]
        A.set_detect_anomaly(True, check_nan=False)  # as a function: stays on
        out += [G.is_anomaly_enabled(), G.is_anomaly_check_nan_enabled()]
        A.set_detect_anomaly(False)
        out += [G.is_anomaly_enabled(), G.is_anomaly_check_nan_enabled()]
        return out

    assert ref.same(f) == [False, True, True, False, False, True, True, False, True, True, True, False,
                           True, False, False, True]


def test_enabling_warns(ref):
    for T in (ndgrad, ref.torch) if ref.torch is not None else (ndgrad,):
        with pytest.warns(UserWarning) as w:
            T.autograd.detect_anomaly()
        assert [str(x.message) for x in w] == [ENABLED]
        assert w[0].filename == __file__  # points at the caller
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            T.autograd.set_detect_anomaly(True)  # no warning
            T.autograd.set_detect_anomaly(False)


def test_decorator():
    """ndgrad's addition: ``detect_anomaly`` also decorates (it warns once, when applied)."""
    with pytest.warns(UserWarning, match="Anomaly Detection"):
        @ndgrad.autograd.detect_anomaly(check_nan=False)
        def inner():
            A = ndgrad.autograd
            return A.is_anomaly_enabled(), A.is_anomaly_check_nan_enabled(), len(_modes)

    assert inner() == (True, False, 1)
    assert not ndgrad.autograd.is_anomaly_enabled() and not _modes


# --- the mode stack ---
def test_mode_stack_empty_after_exit_even_on_error():
    with pytest.warns(UserWarning, match="Anomaly Detection"):
        with pytest.raises(ValueError, match="boom"):
            with ndgrad.autograd.detect_anomaly():
                with ndgrad.autograd.detect_anomaly():
                    assert len(_modes) == 1  # nested: pushed once
                    raise ValueError("boom")
    assert not _modes
    with pytest.raises(ZeroDivisionError):
        with ndgrad.autograd.set_detect_anomaly(True):
            assert len(_modes) == 1
            1 / 0  # noqa: B018
    assert not _modes
    ndgrad.autograd.set_detect_anomaly(True)
    ndgrad.autograd.set_detect_anomaly(True)
    assert len(_modes) == 1
    ndgrad.autograd.set_detect_anomaly(False)
    assert not _modes


def test_other_mode_above_survives():
    class Log:
        def __init__(self):
            self.ops = []

        def dispatch(self, rec, args, run):
            self.ops.append(rec.name)
            return run(rec, args)

    from ndgrad._ops.registry import pop_mode, push_mode

    log = Log()
    ndgrad.autograd.set_detect_anomaly(True)
    push_mode(log)
    x = ndgrad.ones(2, requires_grad=True)
    ndgrad.autograd.set_detect_anomaly(False)  # leaves the stack from under the other mode
    assert _modes == [log]
    (x * 2).sum()
    assert pop_mode() is log
    assert log.ops == ["ones", "mul.Tensor", "sum"]  # factories are ops too


# --- forward tracebacks ---
def test_traceback_recorded(ref):
    def f(T):
        x = T.tensor([1.0, 2.0], requires_grad=True)
        plain = (x * 2).grad_fn.metadata
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            with T.autograd.detect_anomaly():
                y = x.exp()
                a, b = (x * 1).unbind()
                v = (x * 1)
                v[:1].mul_(3)  # in place on a view: the base's CopySlices is recorded too
        md = y.grad_fn.metadata
        tb = md["traceback_"]
        return (sorted(plain), sorted(md), type(tb).__name__, _ours("".join(tb)).splitlines()[-1].strip(),
                sorted(a.grad_fn.metadata), sorted(v.grad_fn.metadata))

    got = ref.same(f)
    assert got[3] == "y = x.exp()"


# --- a failing backward ---
def test_error_warns_forward_traceback(ref):
    def f(T):
        x = T.tensor([1.0, 4.0], requires_grad=True)

        def run():
            y = x * 2
            y.register_hook(lambda g: 1 / 0)
            y.sum().backward()

        return _backward_report(T, run)

    err, msgs = ref.same(f)
    assert err == ("ZeroDivisionError", "division by zero")
    assert msgs[0].startswith("Error detected in MulBackward0. Traceback of forward call that caused the error:\n")
    assert msgs[0].endswith("    y = x * 2\n")


def test_error_without_forward_info(ref):
    def f(T):
        x = T.tensor([1.0, 4.0], requires_grad=True)
        y = x.sqrt()  # recorded before anomaly mode: no traceback
        y.grad_fn.register_hook(lambda gi, go: 1 / 0)
        return _backward_report(T, lambda: y.sum().backward())

    assert ref.same(f) == (("ZeroDivisionError", "division by zero"), [
        "Error detected in SqrtBackward0. No forward pass information available. Enable detect anomaly "
        "during forward pass for more information."])


def test_nested_create_graph_reports_parent(ref):
    def f(T):
        x = T.tensor([1.0, 4.0], requires_grad=True)
        box = []

        def run():
            y = x.sqrt()
            (g,) = T.autograd.grad(y.sum(), x, create_graph=True)
            box.append(g.grad_fn.metadata["parent_"] is y.grad_fn)
            g.grad_fn.register_prehook(lambda go: 1 / 0)
            g.sum().backward()

        err, msgs = _backward_report(T, run)
        return err, msgs, box

    err, msgs, box = ref.same(f)
    assert box == [True]
    assert len(msgs) == 2
    assert msgs[1].startswith("\n\nPrevious calculation was induced by SqrtBackward0. Traceback of "
                              "forward call that induced the previous calculation:\n")


def test_backward_inside_backward(ref):
    def f(T):
        x = T.tensor([1.0, 4.0], requires_grad=True)

        def hook(g):
            with T.enable_grad():
                w = T.tensor([2.0], requires_grad=True)
                z = w * 3  # made while the engine runs y's node: that node is its parent
                z.register_hook(lambda gz: 1 / 0)
                z.sum().backward()

        def run():
            y = x * 2
            y.register_hook(hook)
            y.sum().backward()

        return _backward_report(T, run)

    err, msgs = ref.same(f)
    assert err == ("ZeroDivisionError", "division by zero")
    # the inner node, its parent (y's node), then y's node again as the error leaves it
    assert [m.split(".")[0].strip() for m in msgs] == [
        "Error detected in MulBackward0", "Previous calculation was induced by MulBackward0",
        "Error detected in MulBackward0"]
    assert msgs[0].endswith("    z = w * 3  # made while the engine runs y's node: that node is its parent\n")
    assert msgs[1].endswith("    y = x * 2\n")


# --- check_nan ---
def test_nan_raises(ref):
    def f(T):
        x = T.tensor([1.0, 0.0], requires_grad=True)

        def run():
            y = (x * 2).sqrt()
            z = y.div(T.tensor([0.0, 0.0]))
            (z * 0).sum().backward()

        return _backward_report(T, run), x.grad

    (err, msgs), grad = ref.same(f)
    assert err == ("RuntimeError", "Function 'DivBackward0' returned nan values in its 0th output.")
    assert msgs[0].endswith("    z = y.div(T.tensor([0.0, 0.0]))\n")
    assert grad is None


def test_nan_in_second_output(ref):
    def f(T):
        a = T.tensor([float("nan")], requires_grad=True)
        b = T.tensor([1.0], requires_grad=True)
        return _backward_report(T, lambda: (a * b).sum().backward())

    err, _ = ref.same(f)
    assert err == ("RuntimeError", "Function 'MulBackward0' returned nan values in its 1th output.")


def test_check_nan_false_and_forward_only(ref):
    def f(T):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            x = T.tensor([0.0], requires_grad=True)
            with np.errstate(all="ignore"), T.autograd.detect_anomaly(check_nan=False):
                (x * x).sqrt().sum().backward()
            g1 = x.grad.clone()
            with T.autograd.detect_anomaly():  # recorded under anomaly, backward outside: unchecked
                y = (x * x).sqrt().sum()
            with np.errstate(all="ignore"):
                y.backward()
        return g1, x.grad

    ref.same(f)


def test_results_match_plain_engine(ref):
    """The checked loop computes what the fast one does (fan-in, retain_graph, grad(inputs))."""

    def f(T):
        x = T.tensor([[1.0, 2.0], [3.0, 4.0]], dtype=T.float64, requires_grad=True)
        w = T.tensor([0.5, -1.5], dtype=T.float64, requires_grad=True)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            with T.autograd.detect_anomaly():
                h = (x * w).tanh()
                y = (h * h + h.exp() * x).sum(0) + w
                out = y.sum()
                out.backward(retain_graph=True)
                gx, = T.autograd.grad(out, x, create_graph=True)
                gg, = T.autograd.grad(gx.sum(), w)
        return x.grad, w.grad, gx, gg

    ref.same(f)


def test_custom_function_error_shows_forward_and_parent(ref):
    """A custom Function's node gets a forward traceback too; a failure in a nested backward
    run from its backward names it as the parent."""

    def f(T):
        class Inner(T.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                return x * 2

            @staticmethod
            def backward(ctx, g):
                raise ValueError("inner backward failed")

        class Outer(T.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                return x + 1

            @staticmethod
            def backward(ctx, g):
                with T.enable_grad():
                    w = T.ones(2, requires_grad=True)
                    Inner.apply(w).sum().backward()  # made while Outer's node runs
                return g

        def run():
            x = T.ones(2, requires_grad=True)
            Outer.apply(x).sum().backward()

        return _backward_report(T, run)

    err, msgs = ref.same(f)
    assert err == ("ValueError", "inner backward failed")
    assert msgs[0].startswith("Error detected in InnerBackward. Traceback of forward call")
    assert "Inner.apply(w)" in msgs[0]
    assert msgs[1].startswith("\n\nPrevious calculation was induced by OuterBackward.")
    assert msgs[2].startswith("Error detected in OuterBackward.")  # as the error leaves it
