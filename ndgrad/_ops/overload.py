"""PyTorch's view of the op table: ``ndgrad.ops.aten.<name>.<overload>`` and op schemas.

An op record is itself the ``OpOverload`` (``ndgrad.ops.aten.mm.default is`` the record that a
dispatch mode receives as ``func``); this module adds the packets grouping a name's overloads,
the ``aten`` namespace, and ``FunctionSchema``/``Argument``/``AliasInfo`` objects built from the
schema string when first asked for (never on the hot path).
"""

from __future__ import annotations

__all__ = ["aten", "OpOverloadPacket", "FunctionSchema", "Argument", "AliasInfo"]


class OpName(str):
    """An op record's ``name`` (``"add.Tensor"``): a string that, called, gives PyTorch's
    ``func.name()`` (``"aten::add.Tensor"``)."""

    __slots__ = ()

    def __call__(self) -> str:
        return "aten::" + self


class AliasInfo:
    """``Tensor(a!)``: the value aliases set ``a``; ``!`` marks a write."""

    __slots__ = ("is_write", "before_set", "after_set")

    def __init__(self, letter: str):
        self.is_write = letter.endswith("!")
        self.before_set = self.after_set = {"alias::" + letter.rstrip("!")}

    def __repr__(self) -> str:
        return f"AliasInfo(is_write={self.is_write}, before_set={self.before_set})"


class Argument:
    __slots__ = ("name", "type", "default_value", "has_default_value", "kwarg_only", "alias_info",
                 "is_out")

    def __init__(self, name, type_, default, has_default, kwarg_only, alias):
        self.name, self.type, self.default_value = name, type_, default
        self.has_default_value = has_default
        self.kwarg_only = kwarg_only
        self.alias_info = AliasInfo(alias) if alias else None
        self.is_out = False

    def __repr__(self) -> str:
        return f"Argument(name={self.name!r}, type={self.type!r})"


class FunctionSchema:
    """``func._schema``: name, overload name, arguments and returns with their alias info."""

    __slots__ = ("name", "overload_name", "arguments", "returns", "_text")

    def __init__(self, rec):
        base, _, overload = rec.name.partition(".")
        self.name = "aten::" + base
        self.overload_name = rec.overload or overload
        self.arguments = [
            Argument(p.name, p.type, p.default, p.has_default, p.kwarg_only, p.alias)
            for p in rec.params
        ]
        self.returns = [Argument(n or "", "Tensor[]" if is_list else "Tensor", None, False, False, a)
                        for n, a, is_list in rec.returns]
        text = rec.schema
        if rec.kind == "inplace" and rec.outplace is not None:  # add_ shares add's parameters
            self.arguments[0].alias_info = AliasInfo("a!")
            self.returns = [Argument("", "Tensor", None, False, False, "a!")]
            args = text[text.index("(") + 1: text.rindex(")", 0, text.index("->"))]
            first, _, rest = args.partition(" ")
            text = f"{base}.{self.overload_name}({first}(a!) {rest}) -> Tensor(a!)"
        self._text = "aten::" + text

    @property
    def is_mutable(self) -> bool:
        return any(a.alias_info is not None and a.alias_info.is_write for a in self.arguments)

    def __str__(self) -> str:
        return self._text

    __repr__ = __str__


class OpOverloadPacket:
    """``ndgrad.ops.aten.add``: the overloads of one name (``.Tensor``, ``.default``, ...);
    calling it calls the public function."""

    def __init__(self, name: str):
        self.__name__ = name
        self._qualified_op_name = "aten::" + name
        self._overloads: dict = {}

    def overloads(self) -> list:
        return list(self._overloads)

    def __getattr__(self, overload):
        try:
            return self.__dict__["_overloads"][overload]
        except KeyError:
            raise AttributeError(
                f"The underlying op of 'aten.{self.__name__}' has no overload name '{overload}'"
            ) from None

    def __call__(self, *args, **kwargs):
        first = next(iter(self._overloads.values()))
        return first.call(*args, **kwargs)

    def __repr__(self) -> str:
        return f"<OpOverloadPacket(op='aten.{self.__name__}')>"

    def __str__(self) -> str:
        return "aten." + self.__name__


class _OpNamespace:
    """``ndgrad.ops.aten``: a packet per op name."""

    def __init__(self, name: str):
        self.name = name
        self._packets: dict = {}

    def __getattr__(self, op):
        try:
            return self.__dict__["_packets"][op]
        except KeyError:
            raise AttributeError(f"'_OpNamespace' '{self.name}' object has no attribute '{op}'") from None

    def __dir__(self):
        return sorted(self._packets)


aten = _OpNamespace("aten")


def register(rec) -> None:
    """Make ``rec`` reachable as ``aten.<name>.<overload>`` (``default`` when it has none)."""
    base, _, overload = rec.name.partition(".")
    rec.name = OpName(rec.name)
    packet = aten._packets.get(base)
    if packet is None:
        packet = aten._packets[base] = OpOverloadPacket(base)
    packet._overloads[overload or rec.overload or "default"] = rec  # add_ keeps add's "Tensor"
    rec.extra["packet"] = packet
