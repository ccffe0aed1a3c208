"""AOT autograd (issue 15, item 5): one capture records a function's forward and, through the
engine (``autograd.grad`` with the outputs' gradients as placeholders), its backward into a
joint graph; a partitioner (``partitioners.py``) splits it into a forward graph returning
``(*outputs, *saved)`` and a backward graph taking ``(*saved, *tangents)``; each half goes to
its compiler, and the pair runs as one custom ``Function`` whose forward saves with
``ctx.save_for_backward`` (so saved-tensor hooks, checkpointing and ``save_on_cpu`` see compiled
regions). PyTorch's public names are re-exported by ``ndgrad._functorch.aot_autograd``.
"""

from __future__ import annotations

import operator

from .. import _factories
from .._ops.overload import aten
from .._tensor import Tensor
from ..autograd.engine import _task_stack, run_backward
from ..autograd.function import Function
from ..autograd.grad_mode import state as _grad_state
from ..autograd.node import _root, shared_view
from ..autograd.saved import _hooks, hooks_in_use
from ..nn.modules.module import Module
from .capture import Capture, paused
from .graph_module import HandedOver
from .partitioners import default_partition, min_cut_rematerialization_partition

__all__ = ["aot_function", "aot_module", "aot_module_simplified", "make_boxed_func",
           "make_boxed_compiler", "nop", "boxed_nop", "aot_eager_backend"]


# --- the boxed calling convention ---
def make_boxed_func(f):
    """``f(*args)`` as a function of one list (the boxed convention: a compiled function may
    clear the list to free its inputs early)."""

    def g(args):
        return f(*args)

    g._boxed_call = True
    return g


def make_boxed_compiler(compiler):
    """A compiler whose compiled functions take one list argument."""

    def boxed(gm, example_inputs):
        out = compiler(gm, example_inputs)
        return out if getattr(out, "_boxed_call", False) else make_boxed_func(out)

    return boxed


def nop(gm, example_inputs):
    """The compiler that compiles nothing: the graph module itself."""
    return gm


def boxed_nop(gm, example_inputs):
    return make_boxed_func(gm.forward)


def _call(f, args: list):
    return f(args) if getattr(f, "_boxed_call", False) else f(*args)


# --- pytrees of tuples, lists and dicts ---
def _flatten(x, leaves: list):
    if isinstance(x, (tuple, list)):
        tp = list if type(x) is HandedOver else type(x)
        return (tp, tuple(_flatten(y, leaves) for y in x))
    if type(x) is dict:
        return (dict, tuple(x), tuple(_flatten(v, leaves) for v in x.values()))
    leaves.append(x)
    return None


def _unflatten(spec, it):
    if spec is None:
        return next(it)
    if spec[0] is dict:
        return {k: _unflatten(s, it) for k, s in zip(spec[1], spec[2], strict=True)}
    tp, items = spec
    vals = [_unflatten(s, it) for s in items]
    if tp is tuple or tp is list:
        return tp(vals)
    return tp(*vals) if hasattr(tp, "_fields") else tp(vals)


def _leaf_key(x):
    if isinstance(x, Tensor):
        return (type(x), x.shape, x.dtype, x.device, x.requires_grad, x.stride())
    try:
        hash(x)
    except TypeError:
        return (type(x), id(x))
    return (type(x), x)


# --- one compiled entry ---
class _Entry:
    """What one input signature compiled to: the forward (and backward) compiled functions, the
    ``Function`` running them, and how to rebuild the output structure."""

    def __init__(self):
        self.fw = self.bw = None
        self.bw_gm = None
        self.bw_compiler = None
        self.out_spec = self.out_template = None
        self.tensor_idx = ()
        self.n_out = 0
        self.diff_out = self.diff_in = ()
        self.fn_cls = None
        self.fw_gm = self.joint = None
        self.num_saved = 0
        self.bare_saved = ()  # saved values the forward hands over as bare arrays
        self.other_saved = self.kept_pos = ()
        self.bw_takes_arrays = False

    def run(self, leaves: list):
        """Run on ``leaves`` (the flattened arguments), which it empties: the compiled code
        (boxed) then holds the only references to its inputs."""
        tensors = [leaves[i] for i in self.tensor_idx]
        leaves.clear()
        if self.fn_cls is not None:
            outs = self.fn_cls.apply(*tensors)
            if type(outs) is not tuple:
                outs = (outs,)
        else:
            outs = _call(self.fw, tensors)
        it = iter(outs)
        return _unflatten(self.out_spec, iter([next(it) if t else c
                                               for t, c in self.out_template]))


def _make_function(entry: _Entry):
    n_out, diff_out, diff_in = entry.n_out, entry.diff_out, entry.diff_in
    nondiff = tuple(i for i in range(n_out) if i not in set(diff_out))

    class CompiledFunction(Function):
        _fresh_grads = True  # backward marks what aliases its inputs or itself (_own)

        @staticmethod
        def forward(ctx, *args):
            res = tuple(_call(entry.fw, list(args)))
            outs, saved = res[:n_out], list(res[n_out:])
            bare = entry.bare_saved
            if bare and hooks_in_use and _hooks.stack:
                for i in bare:  # saved-tensor hooks see every saved value, as in eager
                    saved[i] = _bare_tensor(saved[i])
                bare = ()
            ctx.bare_wrapped = bool(entry.bare_saved) and not bare
            # by position: Tensors go through save_for_backward (version checks, hooks), the
            # rest (bare arrays of private values, numbers) stays in one list
            pos = []
            for i in (entry.other_saved if bare else range(len(saved))):
                if isinstance(saved[i], Tensor):
                    pos.append(i)
            ctx.save_for_backward(*[saved[i] for i in pos])
            for i in pos:
                saved[i] = None
            ctx.saved_layout, ctx.tensor_pos = saved, pos
            if nondiff:
                ctx.mark_non_differentiable(*[outs[i] for i in nondiff
                                              if isinstance(outs[i], Tensor)])
            return outs

        @staticmethod
        def backward(ctx, *grads):
            unpacked = ctx.saved_tensors
            saved = list(ctx.saved_layout)
            for i, t in zip(ctx.tensor_pos, unpacked):
                saved[i] = t
            tasks = _task_stack()
            keep = not tasks or tasks[-1].keep_graph
            if not keep:  # released with the saved tensors
                ctx.saved_layout = None
            tangents = [grads[i].contiguous() for i in diff_out]  # captured contiguous
            bare = entry.bare_saved
            if entry.bw is None:
                example = list(saved)
                for i in bare:
                    example[i] = _bare_tensor(example[i])
                _set_bw(entry, entry.bw_compiler(entry.bw_gm, [*example, *tangents]))
            takes = entry.bw_takes_arrays
            if bare and (ctx.bare_wrapped or not takes):
                for i in bare:  # each as the backward takes it
                    s = saved[i]
                    if takes:
                        if isinstance(s, Tensor):
                            saved[i] = s._data
                    elif not isinstance(s, Tensor):
                        saved[i] = _bare_tensor(s)
            args = saved + tangents
            saved = tangents = unpacked = None  # the boxed call frees each input after its use
            # Memory someone keeps (inputs, tangents; the bare private arrays only while the
            # graph is retained): a result sharing it is handed out as a view, not stolen.
            held = set()
            for i in (range(len(args)) if keep or ctx.bare_wrapped else entry.kept_pos):
                t = args[i]
                if isinstance(t, Tensor):
                    t = t._data
                b = getattr(t, "base", None)  # (a number's id is harmless here)
                held.add(id(t) if b is None else id(_root(t)))
            t = b = None
            res = _call(entry.bw, args)
            out = [None] * len(ctx.needs_input_grad)
            for k, r in zip(diff_in, res, strict=True):
                if isinstance(r, Tensor) and not r._rg:
                    root = id(_root(r._data))
                    if root in held:  # an input's memory, or a result given twice
                        r = shared_view(r)
                    held.add(root)
                out[k] = r
            return tuple(out)

    return CompiledFunction


def _bare_tensor(a):
    return a if isinstance(a, Tensor) else Tensor._make(a, None, 0, None)


def _private_saved(fw_gm, n_out: int) -> tuple:
    """Which saved values (indices among them) only the compiled pair ever sees: fresh results
    of a plain op, neither an input, an output, a view nor a write. No user code can modify
    one between forward and backward, so it needs no version check: a compiler that agrees
    (``gm.meta["bare_outputs"]`` / ``["array_placeholders"]``, honoured by inductor) hands it
    over as a bare array, without a Tensor, save_for_backward and unpack around it."""
    out = next(n for n in reversed(fw_gm.graph.nodes) if n.op == "output").args[0]
    visible = set(out[:n_out])
    private = []
    for j, v in enumerate(out[n_out:]):
        src = v.args[0] if v.op == "call_function" and v.target is operator.getitem else v
        rec = src.target if src.op == "call_function" else None
        if v not in visible and getattr(rec, "kind", None) == "plain" and \
                not getattr(getattr(rec, "_schema", None), "is_mutable", False):
            private.append(j)
    return tuple(private)


def _set_bw(entry, fn) -> None:
    entry.bw = fn
    takes = getattr(fn, "_array_placeholders", ())
    entry.bw_takes_arrays = all(i in takes for i in entry.bare_saved)


class _Saved:
    """Saved-tensor hooks off and the RNG state kept while compiling: the capture run is not the
    user's run (its saves must not reach the user's hooks; the compiled run draws as eager)."""

    def __enter__(self):
        self.hooks, _hooks.stack = _hooks.stack, []
        self.rng = _factories.get_rng_state()

    def __exit__(self, *exc):
        _hooks.stack = self.hooks
        _factories.set_rng_state(self.rng)


def _compile(fn, leaves: list, spec, lifted: list, fw_compiler, bw_compiler, partition_fn,
             inference_compiler) -> _Entry:
    entry = _Entry()
    entry.tensor_idx = tuple(i for i, x in enumerate(leaves) if isinstance(x, Tensor))
    n_lift = len(lifted)
    primals = []
    for i in entry.tensor_idx:
        t = leaves[i]
        if i < n_lift:  # a parameter or buffer: read by attribute, so passed as itself
            primals.append(t)
        else:
            p = t.detach().clone()
            primals.append(p.requires_grad_() if t.requires_grad else p)
    snap = [(t, t._data.copy()) for t in lifted if not t.requires_grad]
    needs = _grad_state.grad_enabled and any(p.requires_grad for p in primals)

    def call(tensors):
        ls = list(leaves)
        for i, v in zip(entry.tensor_idx, tensors, strict=True):
            ls[i] = v
        args, kwargs = _unflatten(spec, iter(ls[n_lift:]))
        return fn(*args, **kwargs)

    cap = Capture()
    if isinstance(fn, Module):
        cap.add_module("", fn)
    else:
        cap.add_modules_reachable_from(fn)
    cap.add_inputs([(f"primals_{k + 1}", p) for k, p in enumerate(primals)])
    with _Saved():
        try:
            with cap.mode:
                out = call(primals)
                out_leaves: list = []
                entry.out_spec = _flatten(out, out_leaves)
                out_t = [o for o in out_leaves if isinstance(o, Tensor)]
                entry.out_template = [(isinstance(o, Tensor), None if isinstance(o, Tensor)
                                       else o) for o in out_leaves]
                entry.n_out = len(out_t)
                entry.diff_out = tuple(i for i, o in enumerate(out_t) if o.requires_grad)
                entry.diff_in = tuple(k for k, p in enumerate(primals) if p.requires_grad)
                result = tuple(out_t)
                if needs and entry.diff_out:
                    with paused(cap):
                        tangents = [aten.ones_like.default(out_t[i]) for i in entry.diff_out]
                    cap.add_inputs([(f"tangents_{m + 1}", t) for m, t in enumerate(tangents)])
                    # The engine itself (autograd.grad less its root-gradient checks, which
                    # would hand the engine an alias of each tangent, not the placeholder).
                    grads = run_backward([out_t[i] for i in entry.diff_out], tangents, False,
                                         False, [primals[k] for k in entry.diff_in], True, False)
                    result += tuple(grads)
                else:
                    needs = False
            joint = cap.finish(result)
        finally:
            for t, a in snap:  # the capture run's writes (running statistics) are undone
                if t._data.shape == a.shape:
                    t._data[...] = a
    entry.joint = joint
    if not needs:
        entry.fw_gm = joint
        compiler = inference_compiler or fw_compiler
        entry.fw = compiler(joint, [leaves[i] for i in entry.tensor_idx])
        return entry
    _move_placeholders_first(joint)
    fw_gm, bw_gm = partition_fn(joint, [*primals, *tangents], num_fwd_outputs=entry.n_out)
    entry.fw_gm, entry.bw_gm = fw_gm, bw_gm
    entry.num_saved = fw_gm.meta["num_saved"]
    private = _private_saved(fw_gm, entry.n_out)
    fw_gm.meta["bare_outputs"] = frozenset(entry.n_out + j for j in private)
    bw_gm.meta["array_placeholders"] = frozenset(private)
    entry.fw = fw_compiler(fw_gm, [leaves[i] for i in entry.tensor_idx])
    took = getattr(entry.fw, "_bare_outputs", ())
    entry.bare_saved = tuple(j for j in private if entry.n_out + j in took)
    entry.other_saved = tuple(j for j in range(entry.num_saved) if j not in entry.bare_saved)
    entry.kept_pos = entry.other_saved + tuple(range(entry.num_saved,
                                                     entry.num_saved + len(entry.diff_out)))
    entry.bw_compiler = bw_compiler  # compiled at the first backward, on its real inputs
    if getattr(bw_compiler, "needs_example_inputs", True) is False:
        _set_bw(entry, bw_compiler(bw_gm, None))  # now: its build overlaps the forward's
    entry.fn_cls = _make_function(entry)
    return entry


def _move_placeholders_first(gm) -> None:
    """The tangents entered the capture after the forward: move them up with the primals."""
    nodes = list(gm.graph.nodes)
    last = None
    for n in nodes:
        if n.op != "placeholder":
            continue
        if last is None:
            if n is not nodes[0]:
                nodes[0].prepend(n)
        else:
            last.append(n)
        last = n
    # No recompile: the signature (placeholder order) is unchanged, so the code stays valid;
    # regenerating it costs ~0.2 s on a 2000-op chain.


class AOTFunction:
    """What ``aot_function`` returns: compiles per input signature (shapes, dtypes, strides,
    requires_grad, non-tensor values, grad mode), then runs the compiled entry."""

    def __init__(self, fn, fw_compiler, bw_compiler=None, partition_fn=default_partition,
                 inference_compiler=None, lift_parameters: bool = True):
        self.fn = fn
        self.fw_compiler = fw_compiler
        self.bw_compiler = bw_compiler if bw_compiler is not None else fw_compiler
        self.partition_fn = partition_fn
        self.inference_compiler = inference_compiler
        self.cache: dict = {}
        self.lifted: list = []
        if lift_parameters:  # parameters and buffers the function reads become graph inputs
            probe = Capture()
            if isinstance(fn, Module):
                probe.add_module("", fn)
            else:
                probe.add_modules_reachable_from(fn)
            seen = set()
            for t in probe.attr_tensors.values():
                if id(t) not in seen:
                    seen.add(id(t))
                    self.lifted.append(t)

    def __call__(self, *args, **kwargs):
        leaves: list = list(self.lifted)
        spec = _flatten((args, kwargs), leaves)
        for a in args:
            if type(a) is HandedOver:  # its values are in leaves now
                a.clear()
        key = (spec, _grad_state.grad_enabled, tuple(_leaf_key(x) for x in leaves))
        entry = self.cache.get(key)
        if entry is None:
            entry = self.cache[key] = _compile(
                self.fn, leaves, spec, self.lifted, self.fw_compiler, self.bw_compiler,
                self.partition_fn, self.inference_compiler)
        return entry.run(leaves)


def aot_function(fn, fw_compiler, bw_compiler=None, partition_fn=default_partition,
                 decompositions=None, num_params_buffers: int = 0,
                 keep_inference_input_mutations: bool = False, inference_compiler=None,
                 **kwargs):
    """Trace ``fn``'s forward and backward ahead of time, partition the joint graph with
    ``partition_fn``, compile each half (``fw_compiler``, ``bw_compiler``, default the forward
    one) and return a function that runs them as one autograd ``Function``. Parameters and
    buffers of modules ``fn`` reads become graph inputs. ``decompositions`` and
    ``num_params_buffers`` are accepted for PyTorch's signature (capture already records
    ndgrad's primitives).

    >>> import ndgrad
    >>> f = aot_function(lambda x: (x * x).sum(), nop)
    >>> x = ndgrad.ones(3, requires_grad=True)
    >>> f(x).backward(); x.grad
    tensor([2., 2., 2.])
    """
    return AOTFunction(fn, fw_compiler, bw_compiler, partition_fn, inference_compiler)


class _AOTModule(Module):
    def __init__(self, mod, fn):
        super().__init__()
        self.orig_module = mod
        object.__setattr__(self, "_aot", fn)

    def forward(self, *args, **kwargs):
        return self._aot(*args, **kwargs)


def aot_module(mod: Module, fw_compiler, bw_compiler=None, partition_fn=default_partition,
               decompositions=None, num_params_buffers: int = 0, **kwargs) -> Module:
    """``aot_function`` for a module: a module whose forward runs ``mod`` compiled, its
    parameters and buffers lifted to graph inputs (they get gradients)."""
    return _AOTModule(mod, AOTFunction(mod, fw_compiler, bw_compiler, partition_fn))


def aot_module_simplified(mod, example_inputs, fw_compiler, bw_compiler=None,
                          partition_fn=default_partition, decompositions=None,
                          keep_inference_input_mutations: bool = False,
                          inference_compiler=None, **kwargs):
    """For a backend: ``mod`` (a GraphModule) compiled ahead of time; returns a function of its
    placeholders' values that returns what ``mod`` returns."""
    f = AOTFunction(mod, fw_compiler, bw_compiler, partition_fn, inference_compiler)

    def forward(*args):
        return f(*args)

    forward.zero_grad = getattr(mod, "zero_grad", None)
    forward._aot = f
    return forward


def aot_eager_backend(gm, example_inputs):
    """The ``aot_eager`` backend: AOT autograd with the min-cut partitioner, no-op compilers."""
    return aot_module_simplified(gm, example_inputs, fw_compiler=boxed_nop,
                                 bw_compiler=boxed_nop,
                                 partition_fn=min_cut_rematerialization_partition)
