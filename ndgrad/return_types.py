"""``ndgrad.return_types``: the named-tuple results of ops with several outputs (``max(dim)``, ...).

Each type is a ``tuple`` subclass with named fields, as PyTorch's structseqs are, so results
unpack (``values, indices = x.max(0)``) and index (``r[0]``) like plain tuples.
"""

from __future__ import annotations

import collections

__all__ = ["max", "min", "sort", "topk", "kthvalue", "median", "nanmedian", "mode"]


def _structseq(name: str, fields: tuple):
    base = collections.namedtuple(name, fields)

    def __repr__(self):
        body = ",\n".join(f"{f}={v!r}" for f, v in zip(fields, self, strict=True))
        return f"ndgrad.return_types.{name}(\n{body})"

    cls = type(name, (base,), {"__slots__": (), "__repr__": __repr__, "__module__": __name__})
    cls.__qualname__ = name
    return cls


max = _structseq("max", ("values", "indices"))  # noqa: A001
min = _structseq("min", ("values", "indices"))  # noqa: A001
sort = _structseq("sort", ("values", "indices"))
topk = _structseq("topk", ("values", "indices"))
kthvalue = _structseq("kthvalue", ("values", "indices"))
median = _structseq("median", ("values", "indices"))
nanmedian = _structseq("nanmedian", ("values", "indices"))
mode = _structseq("mode", ("values", "indices"))
