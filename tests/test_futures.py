"""ndgrad.futures against torch.futures: results, chaining, callback order, exceptions (type and
wording), collect_all / wait_all, and completion from another thread."""

from __future__ import annotations

import threading
import time

import pytest

import ndgrad
from ndgrad.futures import Future, collect_all, wait_all

ONCE = ("Attempting to mark a completed Future as complete again. Note that a Future can only be "
        "marked completed once.")


def _outcome(fn):
    """``fn()``'s value, or (exception type, first line of its message)."""
    try:
        return fn()
    except Exception as e:  # noqa: BLE001  (any outcome is compared)
        return type(e).__name__, str(e).split("\n")[0]


def test_result_wait_value_done(ref):
    def run(T):
        f = T.futures.Future()
        before = f.done()
        f.set_result([1, 2])
        return before, f.done(), f.wait(), f.value()

    ref.same(run)


def test_then_chains(ref):
    def run(T):
        order = []
        f = T.futures.Future()
        a = f.then(lambda fut: order.append("a") or fut.wait() + 1)
        b = a.then(lambda fut: order.append("b") or fut.wait() * 10)
        f.add_done_callback(lambda fut: order.append("cb"))
        pending = (a.done(), b.done())
        f.set_result(1)
        late = f.then(lambda fut: fut.value() - 1)  # already complete: runs inline
        return pending, a.wait(), b.wait(), order, late.done(), late.wait()

    ref.same(run)


def test_callbacks_after_completion_run_inline(ref):
    def run(T):
        seen = []
        f = T.futures.Future()
        f.set_result(5)
        f.add_done_callback(lambda fut: seen.append(fut.value()))
        return seen

    ref.same(run)


def test_set_twice(ref):
    def set_result_twice(T):
        f = T.futures.Future()
        f.set_result(1)
        f.set_result(2)

    def exception_after_result(T):
        f = T.futures.Future()
        f.set_exception(ValueError("a"))
        f.set_result(2)

    def then_future(T):
        f = T.futures.Future()
        child = f.then(lambda fut: 0)
        f.set_result(1)
        child.set_result(2)

    for fn in (set_result_twice, exception_after_result, then_future):
        ref.raises(fn, RuntimeError, ONCE)


def test_set_exception(ref):
    def run(T):
        f = T.futures.Future()
        err = ValueError("boom")
        f.set_exception(err)
        with pytest.raises(ValueError) as got:
            f.wait()
        return f.done(), got.value is err, _outcome(f.value)

    ref.same(run)
    ref.raises(lambda T: T.futures.Future().set_exception("no"), AssertionError,
               "no is of type <class 'str'>, not an Exception.")
    ref.raises(lambda T: T.futures.Future().set_exception(KeyboardInterrupt()), AssertionError,
               " is of type <class 'KeyboardInterrupt'>, not an Exception.")


def test_failing_callback(ref):
    def run(T):
        f = T.futures.Future()
        bad = f.then(lambda fut: 1 / 0)
        rethrown = T.futures.Future()
        via_wait = rethrown.then(lambda fut: fut.wait())
        f.set_result(1)
        rethrown.set_exception(KeyError("k"))
        after_bad = bad.then(lambda fut: fut.value())
        ignoring = bad.then(lambda fut: "ok")
        return (bad.done(), _outcome(bad.wait), _outcome(bad.value), _outcome(via_wait.wait),
                _outcome(after_bad.wait), ignoring.wait())

    got = ref.same(run)
    head = "Got the following error when running the callback: ZeroDivisionError: division by zero"
    assert got[1] == ("RuntimeError", head)


def test_failing_callback_trace():
    f = Future()
    bad = f.then(lambda fut: 1 / 0)
    f.set_result(1)
    with pytest.raises(RuntimeError) as got:
        bad.wait()
    head, _, where = str(got.value).partition("\n\nAt:\n")
    assert head.endswith("ZeroDivisionError: division by zero")
    assert "test_futures.py" in where and "futures/__init__.py" not in where
    assert isinstance(got.value.__cause__, ZeroDivisionError)


def test_failing_done_callback_is_logged(caplog):
    f = Future()
    f.add_done_callback(lambda fut: 1 / 0)
    f.set_result(3)
    assert f.wait() == 3
    assert "Got the following error when running the callback: ZeroDivisionError" in caplog.text


def test_collect_all(ref):
    def run(T):
        a, b = T.futures.Future(), T.futures.Future()
        both = T.futures.collect_all([a, b])
        states = [both.done()]
        b.set_result("b")
        states.append(both.done())
        a.set_result("a")
        futs = both.wait()
        return states, [f.wait() for f in futs], T.futures.collect_all([]).wait()

    ref.same(run)


def test_collect_all_errors(ref):
    def run(T):
        src = T.futures.Future()
        bad = src.then(lambda fut: 1 / 0)
        src.set_result(0)
        pending = T.futures.Future()
        failed = T.futures.collect_all([bad, pending])  # fails without waiting for ``pending``
        held = T.futures.Future()
        held.set_exception(ValueError("v"))
        pending2 = T.futures.Future()
        held2 = T.futures.Future()
        held2.set_exception(KeyError("k"))
        holding = T.futures.collect_all([pending2, held, held2])  # waits for ``pending2``
        states = (failed.done(), _outcome(failed.wait), holding.done())
        pending2.set_result(1)
        seen = []
        holding.add_done_callback(lambda fut: seen.append(_outcome(fut.wait)))
        return (states, holding.done(), _outcome(holding.wait), _outcome(holding.value), seen,
                holding.then(lambda fut: "ran").wait())

    ref.same(run)


def test_wait_all(ref):
    def run(T):
        a, b = T.futures.Future(), T.futures.Future()
        a.set_result(1)
        b.set_result(2)
        held = T.futures.Future()
        held.set_exception(ValueError("v"))
        src = T.futures.Future()
        bad = src.then(lambda fut: 1 / 0)
        src.set_result(0)
        return (T.futures.wait_all([a, b]), T.futures.wait_all([]),
                _outcome(lambda: T.futures.wait_all([a, held])),
                _outcome(lambda: T.futures.wait_all([held, bad])))

    ref.same(run)


def test_type_errors(ref):
    for fn in (lambda T: T.futures.collect_all([1]), lambda T: T.futures.wait_all([1]),
               lambda T: T.futures.Future().then(5),
               lambda T: T.futures.Future().add_done_callback(5),
               lambda T: T.futures.Future([])):
        # torch's wording is pybind11's argument listing; the type is what a program can catch
        with pytest.raises(TypeError):
            fn(ndgrad)
        if ref.torch is not None:
            with pytest.raises(TypeError):
                fn(ref.torch)
    ref.raises(lambda T: T.futures.Future(devices=["cpu"]), ValueError,
               "Expected devices to have indices, got cpu")


def test_set_from_another_thread(ref):
    def run(T):
        f = T.futures.Future()
        chained = f.then(lambda fut: fut.wait() + 1)

        def later():
            time.sleep(0.05)
            f.set_result(41)

        t = threading.Thread(target=later)
        t.start()
        out = chained.wait(), f.wait()
        t.join()
        return out

    ref.same(run)


def test_many_threads_wait():
    f = Future()
    got = []
    waiters = [threading.Thread(target=lambda: got.append(f.wait())) for _ in range(8)]
    for t in waiters:
        t.start()
    f.set_result("x")
    for t in waiters:
        t.join(5)
    assert got == ["x"] * 8


def test_concurrent_set_result_once():
    """Racing setters: exactly one wins; the rest get the 'completed once' error."""
    f = Future()
    errors = []

    def setter(i):
        try:
            f.set_result(i)
        except RuntimeError as e:
            errors.append(str(e))

    threads = [threading.Thread(target=setter, args=(i,)) for i in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == [ONCE] * 15 and f.value() in range(16)


def test_value_before_completion():
    with pytest.raises(RuntimeError, match="completed()"):
        Future().value()


def test_module_and_generic():
    assert ndgrad.futures.Future is Future
    assert ndgrad.futures.__all__ == ["Future", "collect_all", "wait_all"]
    assert Future[int].__origin__ is Future  # ``Future[Tensor]`` annotations (DDP comm hooks)
    child = Future().then(lambda fut: None)
    assert isinstance(child, Future) and collect_all([child]) is not None and wait_all([]) == []
