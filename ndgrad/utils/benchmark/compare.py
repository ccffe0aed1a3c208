"""``Compare``: Measurements as a table per label (rows: sub_label per thread count, columns:
description), in one time unit. The layout follows torch's; spacing is not byte-identical."""

from __future__ import annotations

from .common import Measurement, select_unit, unit_to_english

__all__ = ["Compare"]


class Compare:
    """Tabulates ``Measurement``s (``print(Compare(results))`` or ``.print()``).

    >>> from ndgrad.utils.benchmark import Compare, Measurement, TaskSpec
    >>> m = Measurement(1, [2e-6], TaskSpec("f(x)", "pass", label="L", description="d"))
    >>> "Times are in microseconds (us)." in str(Compare([m]))
    True
    """

    def __init__(self, results: list[Measurement]) -> None:
        self._results: list[Measurement] = []
        self.extend_results(results)
        self._trim_significant_figures = False
        self._colorize = False
        self._highlight_warnings = False

    def __str__(self) -> str:
        return "\n".join(self._render())

    def extend_results(self, results) -> None:
        for r in results:
            if not isinstance(r, Measurement):
                raise ValueError(  # noqa: TRY004 (torch raises ValueError)
                    f"Expected an instance of `Measurement`, got {type(r)} instead."
                )
        self._results.extend(results)

    def trim_significant_figures(self) -> None:
        self._trim_significant_figures = True

    def colorize(self, rowwise: bool = False) -> None:
        self._colorize = True  # accepted for API compatibility; the table stays plain text

    def highlight_warnings(self) -> None:
        self._highlight_warnings = True

    def print(self) -> None:
        print(str(self))

    def _render(self) -> list[str]:
        merged = Measurement.merge(self._results)
        groups: dict = {}
        for m in merged:
            groups.setdefault(m.label, []).append(m)
        return [self._layout(label, ms) for label, ms in groups.items()]

    def _layout(self, label, ms: list[Measurement]) -> str:
        unit, scale = select_unit(min(m.median for m in ms))
        columns = list(dict.fromkeys(m.description for m in ms))
        threads = sorted(dict.fromkeys(m.num_threads for m in ms))
        rows = list(dict.fromkeys(m.as_row_name for m in ms))
        cell = {(m.num_threads, m.as_row_name, m.description): m for m in ms}

        def fmt(m):
            if m is None:
                return ""
            value = m.median / scale
            if self._trim_significant_figures:
                digits = max(m.significant_figures - len(str(int(value))), 0)
                text = f"{value:.{digits}f}"
            else:
                text = f"{value:.1f}"
            if self._highlight_warnings and m.has_warnings:
                text += f" (! {m.iqr / m.median * 100:.0f}%)"
            return text

        names = [f"      {r}" for r in rows]
        name_w = max([len(n) for n in names] + [1]) + 2
        col_heads = ["" if c is None else str(c) for c in columns]
        body = {(t, r, c): fmt(cell.get((t, r, c))) for t in threads for r in rows for c in columns}
        widths = [
            max([len(h)] + [len(body[t, r, c]) for t in threads for r in rows])
            for h, c in zip(col_heads, columns, strict=True)
        ]
        header = " " * name_w + "".join(
            f"|  {h:^{w}}  " for h, w in zip(col_heads, widths, strict=True)
        )
        total_w = len(header.rstrip())
        lines = [header.rstrip()]
        for t in threads:
            prefix = f"{t} threads: "
            lines.append(prefix + "-" * max(total_w - len(prefix), 0))
            for r, name in zip(rows, names, strict=True):
                if all(cell.get((t, r, c)) is None for c in columns):
                    continue
                lines.append(
                    name.ljust(name_w)
                    + "".join(
                        f"|  {body[t, r, c]:>{w}}  " for c, w in zip(columns, widths, strict=True)
                    ).rstrip()
                )
        title = f" {label} " if label else " "
        dashes = max(total_w - len(title) - 2, 2)
        top = "[" + "-" * (dashes // 2) + title + "-" * (dashes - dashes // 2) + "]"
        footer = f"\nTimes are in {unit_to_english(unit)}s ({unit})."
        return "\n".join([top, *lines, footer]) + "\n"
