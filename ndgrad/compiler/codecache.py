"""The graph cache of ``inductor`` (PyTorch's ``FxGraphCache``): the code generated for a graph,
on disk under a key made from the graph's structure, so that a later process compiling the same
graph loads the code instead of generating it again.

The key covers what generation reads: every node's op, target, name, arguments and tensor
metadata (shape, stride, dtype, device), the graph's bare-array markings, the options, and a hash
of ndgrad's compiler and op-table sources with the NumPy and Python versions (a changed lowering
rule must not meet old code). A graph whose key cannot be written down (an argument or a target
that is not a plain value, an op of the table or a function of ndgrad, NumPy or the standard
library) is not cached.

An entry holds the generated Python source, its C source (whose library ``cpp`` caches on disk
by its own hash) and, for each global the source names, how to make it again in a new process
(``recipe``): an op of the table or its array forward by name, a graph attribute by path, one
of those functions by module and name, or a plain value (a number, a dtype, a small array) kept
as it is. Entries live under ``$NDGRAD_CACHE_DIR`` (as ``cpp``'s libraries), in ``fxgraph/``;
``NDGRAD_FX_GRAPH_CACHE=0`` or ``options={"fx_graph_cache": False}`` turns the cache off.
``ndgrad._dynamo.utils.counters["inductor"]`` counts ``fxgraph_cache_hit``, ``_miss``, ``_bypass``
(a graph that cannot be cached) and ``fxgraph_lookup_write_file`` (an entry written).
"""

from __future__ import annotations

import hashlib
import importlib
import os
import pickle
import sys
import tempfile

import numpy as np

from .. import _dtype as D
from .._backend import Device
from .._ops.registry import OPS, OpRecord
from . import cpp
from .dynamo import counters as _dynamo_counters
from .node import Node, TensorMeta

__all__ = ["enabled", "graph_key", "recipe", "remake", "load", "save"]

# PyTorch's counters and names (``torch._dynamo.utils.counters["inductor"]``): found, not
# found, not cacheable, written.
counters = _dynamo_counters["inductor"]
HIT, MISS, BYPASS, STORED = ("fxgraph_cache_hit", "fxgraph_cache_miss", "fxgraph_cache_bypass",
                             "fxgraph_lookup_write_file")
_version: list = []  # the hash of the sources generation depends on, computed once


def enabled(option) -> bool:
    """Whether the graph cache is on: the compile's option, else ``NDGRAD_FX_GRAPH_CACHE``."""
    if option is not None:
        return bool(option)
    return os.environ.get("NDGRAD_FX_GRAPH_CACHE", "1").lower() not in ("0", "false", "off", "no")


def _dir() -> str:
    return os.path.join(os.path.dirname(cpp.cache_dir()), "fxgraph")


def _code_version() -> str:
    if not _version:
        h = hashlib.sha256(f"{np.__version__} {sys.version}".encode())
        root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        for sub in ("compiler", "_ops"):
            d = os.path.join(root, sub)
            for name in sorted(os.listdir(d)):
                if name.endswith(".py"):
                    with open(os.path.join(d, name), "rb") as f:
                        h.update(name.encode() + b"\0" + f.read())
        _version.append(h.hexdigest())
    return _version[0]


class _Uncacheable(Exception):
    pass


def _target(t) -> str:
    if isinstance(t, OpRecord):
        if OPS.get(t.name) is not t:
            raise _Uncacheable
        return t.name
    if isinstance(t, str):
        return t
    return _import_path(t)


# Modules whose functions a cached graph may name: a user's function of the same name may be
# another function in another process (another ``__main__``, edited code).
_TRUSTED = ("ndgrad", "operator", "_operator", "builtins", "math", "numpy")


def _import_path(obj) -> str:
    """``module:qualname`` of a module-level function or class of ndgrad, NumPy or the standard
    library that importing finds again."""
    mod, qual = getattr(obj, "__module__", None), getattr(obj, "__qualname__", None)
    if not mod or not qual or "<" in qual or mod.split(".")[0] not in _TRUSTED \
            or _resolve(mod, qual) is not obj:
        raise _Uncacheable
    return f"{mod}:{qual}"


def _resolve(mod: str, qual: str):
    try:
        obj = sys.modules.get(mod) or importlib.import_module(mod)
        for atom in qual.split("."):
            obj = getattr(obj, atom)
    except (ImportError, AttributeError):
        return None
    return obj


def _arg(a, index: dict) -> str:
    """An argument as text: nodes by position, plain values by type and repr."""
    if isinstance(a, Node):
        return f"%{index[a]}"
    if type(a) in (list, tuple):
        inner = ",".join(_arg(x, index) for x in a)
        return f"[{inner}]" if type(a) is list else f"({inner})"
    if type(a) is dict:
        return "{" + ",".join(f"{k!r}:{_arg(v, index)}" for k, v in a.items()) + "}"
    r = repr(a)
    if " at 0x" in r:  # an object's identity: nothing another process could match
        raise _Uncacheable
    return f"{type(a).__name__}:{r}"


def _val(v) -> str:
    if isinstance(v, TensorMeta):
        return f"T{tuple(v.shape)}{v.stride()}{v.dtype}{v.device}{int(v.requires_grad)}"
    if type(v) in (list, tuple):
        return "(" + ",".join(_val(x) for x in v) + ")"
    return "" if v is None else _arg(v, {})


def graph_key(gm, *flags) -> str | None:
    """The cache key of ``gm`` compiled with ``flags`` (None: it cannot be cached)."""
    parts = [_code_version(), repr(flags), repr(sorted(gm.meta.get("array_placeholders", ()))),
             repr(sorted(gm.meta.get("bare_outputs", ())))]
    index: dict = {}
    try:
        for n in gm.graph.nodes:
            index[n] = len(index)
            parts.append(f"{n.op} {n.name} {_target(n.target)} {_arg(n.args, index)} "
                         f"{_arg(n.kwargs, index)} {_val(n.meta.get('val'))}")
    except _Uncacheable:
        counters[BYPASS] += 1
        return None
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:40]


# --- the globals of generated code ---
def recipe(obj, attr: str | None = None):
    """How to make ``obj`` again in another process (None: no way). ``attr``: it is the graph's
    attribute at that path."""
    if attr is not None:
        return ("attr", attr)
    if isinstance(obj, OpRecord):
        return ("op", obj.name) if OPS.get(obj.name) is obj else None
    if obj is None or type(obj) in (bool, int, float, complex, str, slice, type(Ellipsis)) \
            or isinstance(obj, (np.dtype, np.generic)):
        return ("value", obj)
    if type(obj) is np.ndarray:
        return ("value", obj) if obj.dtype != object else None
    if isinstance(obj, (D.dtype, Device)):
        return ("value", obj)  # pickled by name: the same object again
    try:
        return ("import", _import_path(obj))
    except _Uncacheable:
        return None


def forward_recipe(rec):
    """The array forward of an op of the table."""
    return ("fwd", rec.name) if OPS.get(rec.name) is rec else None


def remake(r, gm):
    kind, what = r
    if kind == "value":
        return what
    if kind == "op":
        return OPS[what]
    if kind == "fwd":
        return OPS[what].fwd
    if kind == "attr":
        obj = gm
        for atom in what.split("."):
            obj = getattr(obj, atom)
        return obj
    if kind == "null":
        return cpp.null()
    if kind == "import":
        obj = _resolve(*what.split(":"))
        if obj is None:
            raise LookupError(what)
        return obj
    raise LookupError(kind)


# --- entries on disk ---
def load(key: str) -> dict | None:
    path = os.path.join(_dir(), f"{key}.pkl")
    try:
        with open(path, "rb") as f:
            entry = pickle.load(f)  # noqa: S301 - our own cache directory
    except (OSError, EOFError, pickle.UnpicklingError, AttributeError, ImportError):
        counters[MISS] += 1
        return None
    counters[HIT] += 1
    return entry


def save(key: str, entry: dict) -> None:
    """Writes ``entry`` atomically (a reader sees all of it or nothing); a cache that cannot be
    written is skipped, not an error."""
    d = _dir()
    tmp = None
    try:
        os.makedirs(d, exist_ok=True)
        fd, tmp = tempfile.mkstemp(suffix=".tmp", dir=d)
        with os.fdopen(fd, "wb") as f:
            pickle.dump(entry, f, protocol=pickle.HIGHEST_PROTOCOL)
        os.replace(tmp, os.path.join(d, f"{key}.pkl"))
    except (OSError, pickle.PicklingError, TypeError, AttributeError):
        if tmp is not None and os.path.exists(tmp):
            os.unlink(tmp)
        return
    counters[STORED] += 1
