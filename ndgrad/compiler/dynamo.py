"""``ndgrad.compile`` (issue 15, items 3, 4 and 7): a compiled function keeps a cache of
entries, each a guard set (``guards.py``) and what runs when it holds: the backend's callable
over the captured graph, or, when the capture met a graph break (``breaks.py``), the function
run eagerly with each child ``nn.Module`` it calls compiled as its own function. A miss
recompiles up to ``config.recompile_limit``; past it the call runs eager, with one warning.
docs/ARCHITECTURE.md ("Compile stack") gives the policy; ``explain.py`` reports on a capture.
"""

from __future__ import annotations

import collections
import functools
import importlib
import inspect
import itertools
import logging
import threading
import time
import warnings
import weakref

from ..nn.modules.module import Module, _any_global
from . import config
from .backends import lookup_backend
from .breaks import _Breaks, breaks_detected, no_breaks, tls
from .capture import _call_user, capture_for
from .exc import BackendCompilerFailed
from .graph_module import HandedOver
from .guards import GuardSet
from .logs import artifact

__all__ = ["compile", "OptimizedModule", "reset", "disable", "is_compiling", "allow_in_graph",
           "counters", "mark_dynamic", "capture_with_breaks", "list_mode_options"]

logger = logging.getLogger("ndgrad.compiler")

# PyTorch's ``torch._dynamo.utils.counters``: "stats" (captures, cache_hits, recompiles,
# graph_breaks, eager_runs, unique_graphs), "graph_break" (reason -> count), "recompiles"
# (at each recompile, the failed guard of every entry -> count).
counters: collections.defaultdict = collections.defaultdict(collections.Counter)
_STATS = counters["stats"]  # bound once: reset() clears the counters in place

_all: weakref.WeakSet = weakref.WeakSet()  # every compiled function, for reset()
_frame_ids = itertools.count()
_accumulated = [0]  # compiles since the last reset (accumulated_recompile_limit)
_warned_fallback = [False]


def reset() -> None:
    """Clear every compiled function's cache and the counters (``torch._dynamo.reset``)."""
    for cf in list(_all):
        cf.clear()
    for c in counters.values():
        c.clear()
    _accumulated[0] = 0
    from . import compiled_autograd

    compiled_autograd.reset()


def is_compiling() -> bool:
    """True while this thread captures a function for compilation or runs compiled code."""
    return tls.compiling > 0


is_dynamo_compiling = is_compiling


def is_exporting() -> bool:
    """False: ndgrad has no ``torch.export``."""
    return False


# --- capture with break detection ---
def capture_with_breaks(fn, args, kwargs, fullgraph: bool = False, stop_code=None):
    """Run ``fn`` once under capture, detecting graph breaks: ``(gm, result, break reasons)``.
    ``fullgraph`` raises ``Unsupported`` at the first break."""
    cap = capture_for(fn, args, kwargs)
    state = _Breaks(fullgraph, lambda: len(cap.graph.nodes), stop_code or _call_user.__code__)
    prev_cap = tls.capture
    tls.capture = cap
    tls.compiling += 1
    try:
        with breaks_detected(state), cap.mode:
            result = _call_user(fn, args, kwargs)
    finally:
        tls.compiling -= 1
        tls.capture = prev_cap
    with no_breaks():
        gm = cap.finish(result)
    _check_constants(cap, gm, state)
    return gm, result, state.reasons


def _check_constants(cap, gm, state) -> None:
    """A constant that is some met tensor's ``.grad`` (an optimizer step reading gradients) is
    a new object each step: replaying the graph would read a stale one, so it is a break.
    Constants made inside the function from Python data (``tensor([1., 2.])``) stay constants."""
    if not cap.constants:
        return
    grads = set()
    for t in cap.tensors.values():
        m = t._meta
        if m is not None and m.grad is not None:
            grads.add(id(m.grad))
    nodes = {n.target: n for n in gm.graph.nodes if n.op == "get_attr"}
    for name in cap.constants:
        if id(getattr(cap.holder, name)) in grads:
            n = nodes.get(name)
            trace = n.meta.get("stack_trace", "") if n is not None else ""
            state.paused = 0
            state.stop_code = None
            reason = ("a tensor's .grad read inside the function (an optimizer step): it is a "
                      "new tensor each step, so it cannot be a graph constant")
            if state.fullgraph:
                from .exc import Unsupported

                raise Unsupported(f"{reason}\n\nfrom user code:\n{trace}")
            from .breaks import BreakReason

            state.reasons.append(BreakReason(reason, [], len(gm.graph.nodes)))
            return


# --- module calls inside an eager region ---
_lock = threading.Lock()
_patched = [0]
_orig_call = [None]


def _region_call(mod, *args, **kwargs):
    r = tls.region
    if r is None or mod is r.region_root:
        return _orig_call[0](mod, *args, **kwargs)
    child = r.child(mod)
    tls.region = None
    try:
        return _call_module(mod, child, args, kwargs, _orig_call[0])
    finally:
        tls.region = r


def _call_module(mod, cf, args, kwargs, call=None):
    """Call ``mod`` with ``cf`` (its compiled ``forward``): its hooks, when it has any, run
    around the compiled forward, eagerly, on every call."""
    d = mod.__dict__
    if not (d["_forward_hooks"] or d["_forward_pre_hooks"] or d["_backward_hooks"]
            or d["_backward_pre_hooks"] or _any_global[0]):
        return cf(*args, **kwargs)
    had = "forward" in d
    prev = d.get("forward")
    d["forward"] = cf
    try:
        return (call or type(mod).__call__)(mod, *args, **kwargs)
    finally:
        if had:
            d["forward"] = prev
        else:
            del d["forward"]


class _ModuleCallsCompiled:
    """Within, this thread's module calls made directly by ``cf``'s function are routed to a
    compiled function per child module (``Module.__call__`` is patched while any such region
    runs, as FX's tracer patches it)."""

    __slots__ = ("cf", "prev")

    def __init__(self, cf):
        self.cf = cf

    def __enter__(self):
        with _lock:
            _patched[0] += 1
            if _patched[0] == 1:
                _orig_call[0] = Module.__call__
                Module.__call__ = _region_call
        self.prev = tls.region
        tls.region = self.cf

    def __exit__(self, *exc):
        tls.region = self.prev
        with _lock:
            _patched[0] -= 1
            if _patched[0] == 0:
                Module.__call__ = _orig_call[0]


# --- the cache ---
class _Entry:
    __slots__ = ("guards", "run", "kind", "gm", "placeholders", "index", "hits")

    def __init__(self, guards, run, kind, gm, placeholders, index):
        self.guards, self.run, self.kind, self.gm = guards, run, kind, gm
        self.placeholders, self.index, self.hits = placeholders, index, 0


def _placeholder_plan(fn, args, kwargs):
    """A function ``(args, kwargs) -> the graph's placeholder values`` for calls of the same
    form (the guards check the number of arguments and the keywords)."""
    target = fn.forward if isinstance(fn, Module) else fn
    acc = []
    try:
        sig = inspect.signature(target)
        bound = sig.bind(*args, **kwargs)
        pos = [p.name for p in sig.parameters.values()
               if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
        for pname, value in bound.arguments.items():
            kind = sig.parameters[pname].kind
            if kind is inspect.Parameter.VAR_POSITIONAL:
                acc += [f"a[{len(pos) + j}]" for j in range(len(value))]
            elif kind is inspect.Parameter.VAR_KEYWORD:
                acc += [f"kw[{k!r}]" for k in value]
            elif pname in pos[:len(args)]:
                acc.append(f"a[{pos.index(pname)}]")
            else:
                acc.append(f"kw[{pname!r}]")
    except (TypeError, ValueError):
        acc = [f"a[{i}]" for i in range(len(args))] + [f"kw[{k!r}]" for k in kwargs]
    return eval(f"lambda a, kw: ({', '.join(acc)}{',' if len(acc) == 1 else ''})")  # noqa: S307


def _where(fn) -> str:
    code = getattr(fn, "__code__", None) or getattr(getattr(fn, "forward", None), "__code__", None)
    name = getattr(fn, "__qualname__", None) or type(fn).__name__
    if code is None:
        return f"'{name}'"
    return f"'{code.co_name}' ({code.co_filename}:{code.co_firstlineno})"


class CompiledFunction:
    """One compiled function (or module): its cache entries and counts."""

    def __init__(self, fn, backend, backend_name: str, fullgraph: bool = False, dynamic=None,
                 mode=None, options=None, root: Module | None = None):
        if isinstance(fn, Module):  # its forward; its hooks run around it (_call_module)
            root = fn
            fn = fn.__dict__.get("forward") or type(fn).forward.__get__(fn)
        self.fn = fn
        self.backend, self.backend_name = backend, backend_name
        self.fullgraph, self.dynamic, self.mode, self.options = fullgraph, dynamic, mode, options
        self.root = root if root is not None else (fn if isinstance(fn, Module) else
                                                   getattr(fn, "__self__", None))
        if not isinstance(self.root, Module):
            self.root = None
        self.region_root = self.root
        self.frame_id = next(_frame_ids)
        self.entries: list = []
        self.children: dict = {}  # id(module) -> (module, CompiledFunction)
        self.stats = collections.Counter()
        self.break_reasons: list = []
        self.compile_times: list = []
        self.warned = False
        self.backward_compiler = None
        self.boxed = bool(getattr(fn, "_boxed_call", False))  # forward(self, inputs) empties it
        _all.add(self)

    def clear(self) -> None:
        self.entries.clear()
        self.children.clear()
        self.stats.clear()
        self.break_reasons.clear()
        self.warned = False

    @property
    def cache_hits(self) -> int:
        return sum(e.hits for e in self.entries)

    def child(self, mod: Module) -> "CompiledFunction":
        c = self.children.get(id(mod))
        if c is None or c[0] is not mod:
            cf = CompiledFunction(mod, self.backend, self.backend_name, False, self.dynamic,
                                  self.mode, self.options)
            c = self.children[id(mod)] = (mod, cf)
        return c[1]

    def __call__(self, *args, **kwargs):
        if config.compiled_autograd and tls.capture is None:
            # a backward() inside compiled code runs through compiled autograd, its graph
            # compiled with this function's backend (as PyTorch's config.compiled_autograd)
            from . import compiled_autograd

            if not compiled_autograd._compiler_fns:
                if self.backward_compiler is None:  # one per function: its graphs' cache key
                    self.backward_compiler = self._backward_compiler
                with compiled_autograd._enable(self.backward_compiler):
                    return self._call(args, kwargs)
        return self._call(args, kwargs)

    def _backward_compiler(self, gm):
        return compile(gm, backend=self.backend)  # the resolved backend: mode and options in it

    def _call(self, args, kwargs):
        if tls.capture is not None:  # called inside another capture: inlined into its graph
            return self.fn(*args, **kwargs)
        for e in self.entries:
            if e.guards.check(args, kwargs):
                _STATS["cache_hits"] += 1
                e.hits += 1
                if e.kind == "graph":
                    if self.boxed and len(args) == 1 and type(args[0]) is list:
                        # as the function itself would, the caller's list is emptied; the
                        # values go on in a HandedOver list, which AOT empties in turn
                        lst = args[0]
                        args = (HandedOver(lst),)
                        lst.clear()
                    t = tls
                    t.compiling += 1
                    try:
                        return e.run(*e.placeholders(args, kwargs))
                    finally:
                        t.compiling -= 1
                return self._run(e, args, kwargs)
        return self._miss(args, kwargs)

    def _run(self, e, args, kwargs):
        counters["stats"]["eager_regions"] += 1
        with _ModuleCallsCompiled(self):
            return self.fn(*args, **kwargs)

    def _miss(self, args, kwargs):
        if self.entries:
            reasons = [f"{self.frame_id}/{e.index}: {e.guards.failure(args, kwargs)}"
                       for e in self.entries]
            last = reasons[-1]
            limit = None
            if len(self.entries) >= config.recompile_limit:
                limit = ("recompile_limit", config.recompile_limit)
            elif _accumulated[0] >= config.accumulated_recompile_limit:
                limit = ("accumulated_recompile_limit", config.accumulated_recompile_limit)
            if limit is not None:
                if not self.warned:
                    self.warned = True
                    warnings.warn(
                        f"ndgrad._dynamo hit config.{limit[0]} ({limit[1]})\n"
                        f"   function: {_where(self.fn)}\n"
                        f"   last reason: {last}\n"
                        'To log all recompilation reasons, use ndgrad._logging.set_logs('
                        'recompiles=True).\nTo diagnose recompilation issues, see '
                        'docs/ARCHITECTURE.md, "Compile stack".', stacklevel=3)
                self.stats["eager_runs"] += 1
                counters["stats"]["eager_runs"] += 1
                return self.fn(*args, **kwargs)
            self.stats["recompiles"] += 1
            counters["stats"]["recompiles"] += 1
            for r in reasons:
                counters["recompiles"][r.split(": ", 1)[1]] += 1
            artifact("recompiles").debug(
                "Recompiling function %s\n    triggered by the following guard failure(s):\n%s",
                _where(self.fn), "\n".join(f"    - {r}" for r in reasons))
        return self._compile(args, kwargs)

    def _compile(self, args, kwargs):
        guards = GuardSet(self.fn, args, kwargs, root=self.root)  # before the run can change them
        t0 = time.perf_counter()
        gm, result, reasons = capture_with_breaks(self.fn, args, kwargs, self.fullgraph)
        t1 = time.perf_counter()
        _accumulated[0] += 1
        self.stats["captures"] += 1
        counters["stats"]["captures"] += 1
        index = len(self.entries)
        if reasons:
            self.break_reasons += reasons
            self.stats["graph_breaks"] += len(reasons)
            counters["stats"]["graph_breaks"] += len(reasons)
            for r in reasons:
                counters["graph_break"][r.reason] += 1
                artifact("graph_breaks").debug(
                    "Graph break in %s: %s\n  from user code:\n%s", _where(self.fn), r.reason,
                    "".join(_format_stack(r.user_stack)))
            self.entries.append(_Entry(guards, None, "region", gm, None, index))
            self.compile_times.append(("capture", t1 - t0))
            return result
        counters["stats"]["unique_graphs"] += 1
        artifact("graph_code").debug("TRACED GRAPH\n %s", gm.print_readable(print_output=False))
        plan = _placeholder_plan(self.fn, args, kwargs)
        example_inputs = list(plan(args, kwargs))
        try:
            with no_breaks():
                run = self.backend(gm, example_inputs)
        except Exception as ex:
            if config.suppress_errors:
                logger.warning("backend %r failed (%s); running eager", self.backend_name, ex)
                run = gm.forward
            else:
                raise BackendCompilerFailed(self.backend, ex) from ex
        code = getattr(run, "code", None) or getattr(getattr(run, "__self__", None), "code", None)
        if code:
            artifact("output_code").debug("Output code (%s):\n%s", self.backend_name, code)
        self.compile_times.append(("capture", t1 - t0))
        self.compile_times.append((f"backend {self.backend_name}", time.perf_counter() - t1))
        self.entries.append(_Entry(guards, run, "graph", gm, plan, index))
        return result


def _format_stack(stack):
    import traceback

    return traceback.format_list(stack[-1:]) if stack else ["  (no user frame)\n"]


# --- the user API ---
def _resolve_backend(backend):
    if backend == "inductor":
        try:
            importlib.import_module(__package__ + ".inductor")
        except ImportError:
            if not _warned_fallback[0]:
                _warned_fallback[0] = True
                logger.warning("ndgrad.compile: the 'inductor' backend is not available yet; "
                               "using 'eager'")
            backend = "eager"
    fn = lookup_backend(backend)
    return fn, backend if isinstance(backend, str) else getattr(fn, "__name__", "custom")


# What each ``mode`` of ``compile`` sets in the inductor backend's options (PyTorch's
# ``torch._inductor.list_mode_options``).
_MODE_OPTIONS = {
    "default": {},
    "reduce-overhead": {"triton.cudagraphs": True},
    "max-autotune-no-cudagraphs": {"max_autotune": True},
    "max-autotune": {"max_autotune": True, "triton.cudagraphs": True},
}


def list_mode_options(mode: str | None = None, dynamic=None) -> dict:
    """The options ``mode`` sets (all modes' when None), as PyTorch's
    ``torch._inductor.list_mode_options``.

    >>> list_mode_options("reduce-overhead")
    {'triton.cudagraphs': True}
    """
    if not mode:
        return {k: dict(v) for k, v in _MODE_OPTIONS.items()}
    try:
        return dict(_MODE_OPTIONS[mode])
    except KeyError:
        raise RuntimeError(f"Unrecognized mode={mode}, should be one of: "
                           f"{', '.join(_MODE_OPTIONS)}") from None


def _backend_for(backend, mode, options):
    """``(compiler_fn, name)`` for ``compile``'s arguments. The inductor backend gets ``mode``'s
    options updated by ``options`` (an unknown mode raises here, at ``compile``); another backend
    gets ``mode`` and ``options`` as keywords when they are set (PyTorch's
    ``_TorchCompileWrapper``)."""
    if mode is not None and options is not None:
        raise RuntimeError("Either mode or options can be specified, but both can't be "
                           "specified at the same time.")
    from . import backends

    is_inductor = backend == "inductor" or backend is backends.inductor or (
        getattr(backend, "__module__", None) == __package__ + ".inductor"
        and getattr(backend, "__name__", None) == "inductor_backend")
    if is_inductor:
        opts = {**(list_mode_options(mode) if mode else {}), **(options or {})}
    fn, name = _resolve_backend(backend)
    if is_inductor:
        if not opts or fn is backends.eager:  # no options, or inductor fell back to eager
            return fn, name

        def inductor_with_options(gm, example_inputs):
            return fn(gm, example_inputs, options=opts)

        return inductor_with_options, name
    kwargs = {}
    if mode and mode != "default":
        kwargs["mode"] = mode
    if options:
        kwargs["options"] = options
    if not kwargs:
        return fn, name
    return functools.partial(fn, **kwargs), name


class OptimizedModule(Module):
    """What ``ndgrad.compile(module)`` returns: calls go through the compiled function; the
    original module is ``_orig_mod`` (its ``state_dict`` keys carry that prefix, as PyTorch's
    do); other attributes are read from it."""

    def __init__(self, mod: Module, compiled: CompiledFunction):
        super().__init__()
        self._orig_mod = mod
        self.__dict__["_compiled"] = compiled
        self.training = mod.training

    def forward(self, *args, **kwargs):
        return _call_module(self.__dict__["_modules"]["_orig_mod"], self.__dict__["_compiled"],
                            args, kwargs)

    def __getattr__(self, name: str):
        try:
            return super().__getattr__(name)
        except AttributeError:
            return getattr(self.__dict__["_modules"]["_orig_mod"], name)

    def _get_name(self) -> str:
        return "OptimizedModule"


def compile(model=None, *, fullgraph: bool = False, dynamic=None, backend="inductor",  # noqa: A001
            mode=None, options=None, disable: bool = False):
    """Optimize ``model`` (a function or an ``nn.Module``) with ``backend``: calls capture a
    graph per guard set and run the backend's code for it (PyTorch's ``torch.compile``). As a
    decorator with or without arguments. ``dynamic=True`` is accepted, but ndgrad recompiles
    per shape. ``mode`` (``"default"``, ``"reduce-overhead"``: CUDA graphs, ``"max-autotune"``,
    ``"max-autotune-no-cudagraphs"``) or ``options`` set the inductor backend's options
    (``list_mode_options``); another backend receives them as keywords.

    >>> import ndgrad
    >>> @ndgrad.compile(backend="eager")
    ... def f(x):
    ...     return (x * 2).sum()
    >>> f(ndgrad.ones(3)).item()
    6.0
    """
    if model is None:
        return lambda m: compile(m, fullgraph=fullgraph, dynamic=dynamic, backend=backend,
                                 mode=mode, options=options, disable=disable)
    if not callable(model):
        raise RuntimeError("model must be callable")
    if disable:
        return model
    be, name = _backend_for(backend, mode, options)
    cf = CompiledFunction(model, be, name, fullgraph, dynamic, mode, options)
    if isinstance(model, Module):
        return OptimizedModule(model, cf)

    @functools.wraps(model)
    def compiled(*args, **kwargs):
        return cf(*args, **kwargs)

    compiled._ndgrad_compiled = cf
    compiled._torchdynamo_orig_callable = model
    return compiled


def optimize(backend="inductor", *, nopython: bool = False, dynamic=None,
             disable: bool = False):
    """PyTorch's older ``torch._dynamo.optimize(backend)``: a decorator compiling with it."""
    return lambda fn: compile(fn, backend=backend, fullgraph=nopython, dynamic=dynamic,
                              disable=disable)


def compile_module_in_place(mod: Module, *args, **kwargs) -> None:
    """``nn.Module.compile``: the module's ``forward`` becomes the compiled one (hooks run
    around it, outside the graph)."""
    fwd = type(mod).forward.__get__(mod)
    kwargs.pop("model", None)
    if kwargs.pop("disable", False):
        return
    be, name = _backend_for(kwargs.pop("backend", "inductor"), kwargs.get("mode"),
                            kwargs.get("options"))
    cf = CompiledFunction(fwd, be, name, root=mod, **kwargs)

    @functools.wraps(fwd)
    def forward(*a, **k):
        return cf(*a, **k)

    forward._ndgrad_compiled = cf
    mod.__dict__["forward"] = forward


def disable(fn=None, recursive: bool = True, *, reason: str | None = None):
    """``fn`` runs eagerly even when called from compiled code: inside a capture its call is a
    graph break (PyTorch's ``torch.compiler.disable``). As a decorator with or without
    arguments."""
    if fn is None:
        return lambda f: disable(f, recursive, reason=reason)
    if isinstance(fn, OptimizedModule):
        fn = fn._orig_mod
    name = getattr(fn, "__qualname__", type(fn).__name__)

    @functools.wraps(fn)
    def disabled(*args, **kwargs):
        st = tls.breaks
        if st is not None:
            st.hit(f"Skip calling `ndgrad.compiler.disable()`d function {name}"
                   + (f" ({reason})" if reason else ""))
        n = tls.compiling
        tls.compiling = 0
        try:
            with no_breaks():
                return fn(*args, **kwargs)
        finally:
            tls.compiling = n

    disabled._ndgrad_disabled = True
    return disabled


def allow_in_graph(fn):
    """Put calls of ``fn`` in the graph as one ``call_function`` node, not its ops (PyTorch's
    ``allow_in_graph``); use the function it returns."""
    @functools.wraps(fn)
    def in_graph(*args, **kwargs):
        cap = tls.capture
        if cap is None:
            return fn(*args, **kwargs)
        from .capture import paused

        with paused(cap), no_breaks():
            out = fn(*args, **kwargs)
        cap._sync_grad()
        n = cap.graph.call_function(fn, cap._map(tuple(args)), cap._map(dict(kwargs)))
        cap._annotate(n)
        cap._outputs(n, out)
        return out

    in_graph._ndgrad_allow_in_graph = True
    return in_graph


def mark_dynamic(t, index, min=None, max=None) -> None:  # noqa: A002
    """Accepted for PyTorch programs; ndgrad has no symbolic shapes and recompiles per shape."""


def mark_static(t, index=None) -> None:
    """Accepted for PyTorch programs (every dimension is static in ndgrad)."""
