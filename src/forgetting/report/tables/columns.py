"""Tables from declarations: each column says once what it shows and what it writes.

A table is declared as a :class:`Spec`: its name, title, row groups and columns, in order. A
:class:`Column` shows a field of the row (or a text made of the row) and writes fields of the row
to the CSV; an :class:`Estimate` shows an effect of the statistics with its confidence interval and
significance marks, and writes the estimate, the interval, the p-values and the decisions.
:meth:`Spec.fill` makes one :class:`~forgetting.report.tables.writers.Table` of the rows with both views
in the columns' order: the display view (the cells Markdown, LaTeX and HTML show) and the data view
(the CSV). A column without ``key`` is written to the CSV only; one without ``data`` is only shown.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

import forgetting.report.tables.format as fmt
from forgetting.grid import BASELINE
from forgetting.report.stats.holm import holm_adjust
from forgetting.report.tables.notes import ci_header, few_tasks_note, holm_note, resamples_note
from forgetting.report.tables.writers import Heading, Table, latex_escape
from forgetting.study.statistics import StatsSettings

#: a table's row: a summary row of the statistics (or a comparison), with any fields a table adds
Row = Mapping[str, Any]
#: the effect row of ``metric`` for a table row, None when the statistics have none
Effects = Callable[[Row, str], Mapping[str, Any] | None]


@dataclass(frozen=True)
class Column:
    """A column of fields: writes the row's ``data`` fields to the CSV and, with a ``key``, shows
    ``show`` of the first of them (or ``cell`` of the whole row) under ``header``."""

    key: str = ""
    header: str = ""
    data: str | tuple[str, ...] = ()
    show: Callable[[Any], str] = str
    cell: Callable[[Row], str] | None = None
    align: str = "l"  # l | r | c

    @property
    def names(self) -> tuple[str, ...]:
        return (self.data,) if isinstance(self.data, str) else self.data

    def view(self, row: Row) -> tuple[str, dict[str, Any]]:
        """The cell and the CSV values of ``row``."""
        values = {n: row.get(n) for n in self.names}
        if not self.key:
            return "", values
        return (self.cell(row) if self.cell else self.show(row.get(self.names[0]))), values


#: the CSV columns of an estimate beyond its value and interval, when it is tested
_TESTED = ("_p", "_significant", "_p_holm", "_significant_holm")


@dataclass(frozen=True)
class Estimate:
    """The effect ``metric`` of the row's configuration: shown as ``1.23 [1.10, 1.38]`` (or, with
    ``change``, as ``+23 % [+10, +38]``) with its marks; written as ``{data}``, ``{data}_ci_low``,
    ``{data}_ci_high`` and, when ``tested`` (marks and Holm–Bonferroni), ``{data}_p``,
    ``{data}_significant``, ``{data}_p_holm``, ``{data}_significant_holm``. A baseline row shows
    nothing, or its own field ``baseline``; a row without the effect shows –."""

    key: str
    header: str
    metric: str
    data: str
    ci: bool = False  # the header names the interval, e.g. ``[95 % CI]``
    digits: int = 2
    signed: bool = False
    change: bool = False
    tested: bool = True
    #: an effect whose estimate is undefined counts as none: no test, no CSV values
    undefined_is_none: bool = False
    baseline: str | None = None
    align: str = "r"

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(self.data + s for s in ("", "_ci_low", "_ci_high", *(_TESTED if self.tested else ())))

    def effect(self, row: Row, effects: Effects) -> Mapping[str, Any] | None:
        """The row's effect row, None for a baseline row or where the statistics have none."""
        if row.get("configuration") == BASELINE:
            return None
        e = effects(row, self.metric)
        return None if e is None or (self.undefined_is_none and fmt.is_missing(e["estimate"])) else e

    def defined(self, e: Mapping[str, Any] | None, resamples: int) -> str:
        """`` (6511/10000)`` when the effect's interval rests on fewer than all ``resamples``
        (the statistic undefined in the others: ``n_undefined``), else nothing."""
        if e is None or fmt.is_missing(e.get("estimate")) or fmt.is_missing(e.get("n_undefined")):
            return ""
        return fmt.resamples_defined(resamples - int(e["n_undefined"]), resamples)

    def view(self, row: Row, e: Mapping[str, Any] | None) -> tuple[str, dict[str, Any]]:
        """The cell (before its marks) and the CSV values (before the Holm decisions) of ``row``."""
        if row.get("configuration") == BASELINE:
            if self.baseline is None:
                return "", {}
            value = row.get(self.baseline)
            return fmt.number(value, self.digits, signed=self.signed), {self.data: value}
        if e is None:
            return fmt.NA, {}
        values = {self.data: e.get("estimate"), f"{self.data}_ci_low": e.get("ci_low"),
                  f"{self.data}_ci_high": e.get("ci_high")}
        if self.tested:
            values.update({f"{self.data}_p": e.get("p_value"), f"{self.data}_significant": e.get("significant")})
        if self.change:
            return fmt.percent_change(e["estimate"], e["ci_low"], e["ci_high"]), values
        return fmt.with_interval(e["estimate"], e["ci_low"], e["ci_high"], self.digits, signed=self.signed), values


class Holm:
    """Collects the p-values of one table and adjusts them per family: with
    ``statistics.holm_family: column`` each family is one ``unit`` (a column, or a comparison
    kind within a column), with ``table`` the whole table. It also counts what the table's
    notes must explain: the cells whose interval rests on fewer than all resamples
    (``fewer_resamples``: their counts of defined resamples) and the marks withheld on fewer
    than ``statistics.min_paired_tasks`` tasks (``withheld``: their task counts)."""

    def __init__(self, table: str, settings: StatsSettings, unit: str = "column") -> None:
        self.table = table
        self.settings = settings
        self.unit = unit
        self._tests: list[tuple[str, float]] = []
        self.fewer_resamples: list[int] = []
        self.withheld: list[int] = []

    def add(self, family: str, p: Any) -> int:
        key = family if self.settings.holm_family == "column" else self.table
        self._tests.append((key, float("nan") if fmt.is_missing(p) else float(p)))
        return len(self._tests) - 1

    def resolve(self) -> tuple[list[float], list[bool]]:
        adjusted = [float("nan")] * len(self._tests)
        for family in sorted({f for f, _ in self._tests}):
            idx = [i for i, (f, _) in enumerate(self._tests) if f == family]
            adj = holm_adjust(np.array([self._tests[i][1] for i in idx]))
            for i, a in zip(idx, adj.tolist(), strict=True):
                adjusted[i] = a
        reject = [not np.isnan(a) and a < self.settings.alpha for a in adjusted]
        return adjusted, reject

    def sizes(self) -> dict[str, int]:
        """Family → the number of tests it holds (tests without a p-value do not count)."""
        out: dict[str, int] = {}
        for family, p in self._tests:
            out[family] = out.get(family, 0) + (0 if np.isnan(p) else 1)
        return {f: n for f, n in sorted(out.items()) if n}

    def note(self) -> str:
        return holm_note(self.settings, self.sizes(), self.unit, fmt.RAW_MARK, fmt.HOLM_MARK)

    def notes(self) -> list[str]:
        """The Holm note, then what the counts above call for (:mod:`forgetting.report.tables.notes`)."""
        out = [self.note()]
        if self.withheld:
            out.append(few_tasks_note(self.settings, self.withheld))
        if self.fewer_resamples:
            out.append(resamples_note(self.settings, self.fewer_resamples))
        return out


def too_few_tasks(e: Mapping[str, Any], settings: StatsSettings) -> int | None:
    """The effect's paired tasks when they are fewer than ``statistics.min_paired_tasks`` (its
    significance is then not marked), else None (also when the effect does not say)."""
    n = e.get("n_tasks")
    if fmt.is_missing(n) or int(n) >= settings.min_paired_tasks:
        return None
    return int(n)


def _by_metric(row: Row, metric: str) -> str:
    return metric


@dataclass(frozen=True)
class Spec:
    """One table's declaration: its columns, and the row groups (a rule between groups)."""

    name: str
    title: str
    columns: Sequence[Column | Estimate]
    group: Callable[[Row], str]
    #: the Holm–Bonferroni family of a test (with ``statistics.holm_family: column``) and its name
    family: Callable[[Row, str], str] = _by_metric
    unit: str = "column"

    def headings(self, confidence: float) -> list[Heading]:
        ci, ci_tex = ci_header(confidence)
        return [
            Heading(c.key, f"{c.header} {ci}", latex=f"{latex_escape(c.header)} {ci_tex}", align=c.align)
            if isinstance(c, Estimate) and c.ci
            else Heading(c.key, c.header, align=c.align)
            for c in self.columns
            if c.key
        ]

    def fill(self, rows: Iterable[Row], settings: StatsSettings, effects: Effects) -> tuple[Table, Holm | None]:
        """The table of ``rows``, and its Holm–Bonferroni families (None: the table tests nothing)."""
        table = Table(
            name=self.name,
            title=self.title,
            columns=self.headings(settings.confidence),
            data_columns=[n for c in self.columns for n in c.names],
        )
        tested = any(isinstance(c, Estimate) and c.tested for c in self.columns)
        holm = Holm(self.name, settings, self.unit) if tested else None
        # marked once Holm has every test: (row, column, test, raw decision, the effect's tasks
        # when too few to mark, the count of defined resamples)
        pending: list[tuple[int, Estimate, int, bool | None, int | None, str]] = []
        for row in rows:
            cells: dict[str, str] = {}
            data: dict[str, Any] = {}
            for c in self.columns:
                if isinstance(c, Column):
                    text, values = c.view(row)
                else:
                    e = c.effect(row, effects)
                    text, values = c.view(row, e)
                    count = c.defined(e, settings.resamples) if text != fmt.NA else ""
                    if count and holm is not None:
                        holm.fewer_resamples.append(settings.resamples - int(e["n_undefined"]))  # type: ignore[index]
                    if e is not None and holm is not None and c.tested:
                        test = holm.add(self.family(row, c.metric), e.get("p_value"))
                        few = too_few_tasks(e, settings)
                        pending.append((len(table.rows), c, test, e.get("significant"), few, count))
                    else:
                        text += count
                if c.key:
                    cells[c.key] = text
                data.update(values)
            table.add(cells, data, group=self.group(row))
        if holm is not None:
            adjusted, reject = holm.resolve()
            for i, c, test, raw, few, count in pending:
                holm_sig = bool(raw is True and reject[test])
                if table.rows[i][c.key] != fmt.NA:
                    if few is not None and raw is True:
                        table.rows[i][c.key] += fmt.FEW_TASKS_MARK
                        holm.withheld.append(few)
                    else:
                        table.rows[i][c.key] += fmt.marks(raw, holm_sig)
                    table.rows[i][c.key] += count
                table.data[i][c.data + "_p_holm"] = adjusted[test]
                table.data[i][c.data + "_significant_holm"] = holm_sig if raw is not None else None
        return table, holm
