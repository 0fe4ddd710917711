"""Reports over a journal: balances, monthly totals, month-over-month change, budgets.

Every report is computed by a function returning plain data (dicts and small dataclasses)
and printed by a ``render_*`` function returning a text table, so the numbers can be
tested and reused without parsing text.

Periods are calendar months named by ``(year, month)`` pairs; both ends of a range of
months are included. Amounts are summed per currency and never converted.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import date, timedelta
from decimal import ROUND_HALF_EVEN, Decimal

from ledger.journal import Journal, account_matches
from ledger.money import Money, format_amount

__all__ = [
    "BudgetLine",
    "Change",
    "MonthTotal",
    "balances",
    "budget_report",
    "format_table",
    "month_bounds",
    "month_over_month",
    "monthly_totals",
    "months",
    "percent_change",
    "render_balances",
    "render_budget",
    "render_monthly",
    "spending_by_account",
    "truncate_account",
]

Month = tuple[int, int]

_ONE_DECIMAL = Decimal("0.1")


# --------------------------------------------------------------------------- balances


def truncate_account(account: str, depth: int | None) -> str:
    """The account cut to its first ``depth`` levels (``None`` keeps it whole).

    >>> truncate_account("expenses:food:restaurants", 2)
    'expenses:food'
    """
    if depth is None:
        return account
    if depth < 1:
        raise ValueError(f"depth must be at least 1, not {depth}")
    return ":".join(account.split(":")[:depth])


def _ancestors(account: str) -> list[str]:
    """``a:b:c`` -> ``["a", "a:b", "a:b:c"]``."""
    parts = account.split(":")
    return [":".join(parts[: i + 1]) for i in range(len(parts))]


def balances(
    journal: Journal,
    *,
    as_of: date | None = None,
    depth: int | None = None,
    roll_up: bool = True,
) -> dict[str, dict[str, Decimal]]:
    """The balance of every account, per currency: ``{account: {currency: amount}}``.

    With ``roll_up`` (the default) a parent account's balance includes its
    sub-accounts', so ``expenses`` sums ``expenses:food`` and ``expenses:housing``.
    ``depth`` limits the accounts reported to that many levels; ``as_of`` ignores
    transactions after that day. Accounts whose balances are all zero are still listed.
    """
    totals: dict[str, dict[str, Decimal]] = defaultdict(lambda: defaultdict(Decimal))
    for transaction in journal:
        if as_of is not None and transaction.date > as_of:
            continue
        for posting in transaction.postings:
            names = _ancestors(posting.account) if roll_up else [posting.account]
            for name in names:
                if depth is not None and name.count(":") >= depth:
                    continue
                totals[name][posting.amount.currency] += posting.amount.amount
    return {account: dict(sorted(per.items())) for account, per in sorted(totals.items())}


# --------------------------------------------------------------------------- months


def month_bounds(year: int, month: int) -> tuple[date, date]:
    """The first and the last day of a month.

    >>> month_bounds(2024, 2)
    (datetime.date(2024, 2, 1), datetime.date(2024, 2, 29))
    """
    if not 1 <= month <= 12:
        raise ValueError(f"month must be 1 to 12, not {month}")
    first = date(year, month, 1)
    following = date(year + 1, 1, 1) if month == 12 else date(year, month + 1, 1)
    return first, following - timedelta(days=1)


def months(first: Month, last: Month) -> list[Month]:
    """Every month from ``first`` to ``last``, both included.

    >>> months((2023, 11), (2024, 2))
    [(2023, 11), (2023, 12), (2024, 1), (2024, 2)]
    """
    if last < first:
        raise ValueError(f"{last} is before {first}")
    out = []
    year, month = first
    while (year, month) <= last:
        out.append((year, month))
        year, month = (year + 1, 1) if month == 12 else (year, month + 1)
    return out


@dataclass(frozen=True)
class MonthTotal:
    """The net amount posted to an account (and its sub-accounts) in one month."""

    year: int
    month: int
    amount: Decimal
    currency: str

    @property
    def label(self) -> str:
        return f"{self.year:04d}-{self.month:02d}"


def monthly_totals(
    journal: Journal,
    account: str,
    first: Month,
    last: Month,
    *,
    currency: str,
) -> list[MonthTotal]:
    """One :class:`MonthTotal` per month from ``first`` to ``last``, months without
    postings included as zero."""
    out = []
    for year, month in months(first, last):
        start, end = month_bounds(year, month)
        amount = sum(
            (t.amount_for(account, currency) for t in journal.between(start, end)),
            Decimal(0),
        )
        out.append(MonthTotal(year, month, amount, currency))
    return out


# --------------------------------------------------------------------------- change


def percent_change(previous: Decimal, current: Decimal) -> Decimal | None:
    """The change from ``previous`` to ``current`` in percent of ``previous``'s size,
    to one decimal; ``None`` when ``previous`` is zero.

    >>> percent_change(Decimal(200), Decimal(250))
    Decimal('25.0')
    """
    if previous == 0:
        return None
    return ((current - previous) / abs(previous) * 100).quantize(_ONE_DECIMAL, rounding=ROUND_HALF_EVEN)


@dataclass(frozen=True)
class Change:
    """A month's total beside the previous month's and the change between them."""

    year: int
    month: int
    amount: Decimal
    previous: Decimal | None
    difference: Decimal | None
    percent: Decimal | None

    @property
    def label(self) -> str:
        return f"{self.year:04d}-{self.month:02d}"


def month_over_month(totals: Sequence[MonthTotal]) -> list[Change]:
    """Each month's change against the month before; the first month has no change.

    The totals must be consecutive months of one currency, as :func:`monthly_totals`
    returns them.
    """
    if len({t.currency for t in totals}) > 1:
        raise ValueError("month_over_month needs totals in one currency")
    out = []
    previous: MonthTotal | None = None
    for total in totals:
        if previous is None:
            out.append(Change(total.year, total.month, total.amount, None, None, None))
        else:
            out.append(
                Change(
                    total.year,
                    total.month,
                    total.amount,
                    previous.amount,
                    total.amount - previous.amount,
                    percent_change(previous.amount, total.amount),
                )
            )
        previous = total
    return out


# --------------------------------------------------------------------------- budgets


@dataclass(frozen=True)
class BudgetLine:
    """Spending on one account in a month against its budget."""

    account: str
    budget: Decimal
    spent: Decimal
    currency: str

    @property
    def remaining(self) -> Decimal:
        return self.budget - self.spent

    @property
    def used_percent(self) -> Decimal | None:
        """The share of the budget spent, in percent; ``None`` for a zero budget."""
        if self.budget == 0:
            return None
        return (self.spent / self.budget * 100).quantize(_ONE_DECIMAL, rounding=ROUND_HALF_EVEN)

    @property
    def over(self) -> bool:
        return self.spent > self.budget


def budget_report(
    journal: Journal,
    budgets: Mapping[str, Decimal | int | str],
    year: int,
    month: int,
    *,
    currency: str,
) -> list[BudgetLine]:
    """A :class:`BudgetLine` per budgeted account, in the order of ``budgets``.

    A budget covers the account and its sub-accounts. Refunds (negative postings)
    reduce what was spent.
    """
    start, end = month_bounds(year, month)
    in_month = journal.between(start, end)
    lines = []
    for account, budget in budgets.items():
        spent = sum((t.amount_for(account, currency) for t in in_month), Decimal(0))
        lines.append(BudgetLine(account, Decimal(str(budget)), spent, currency))
    return lines


# --------------------------------------------------------------------------- rendering


def format_table(headers: Sequence[str], rows: Iterable[Sequence[str]], *, align: str = "") -> str:
    """A plain-text table; ``align`` has one ``l`` or ``r`` per column (default: left).

    >>> print(format_table(["a", "b"], [["x", "10"]], align="lr"))
    a   b
    -  --
    x  10
    """
    rows = [list(r) for r in rows]
    align = align or "l" * len(headers)
    if len(align) != len(headers) or any(len(r) != len(headers) for r in rows):
        raise ValueError("every row and the alignment need one entry per header")
    widths = [max(len(str(c)) for c in column) for column in zip(headers, *rows, strict=True)]

    def line(cells: Sequence[str]) -> str:
        columns = zip(cells, widths, align, strict=True)
        padded = [cell.rjust(width) if a == "r" else cell.ljust(width) for cell, width, a in columns]
        return "  ".join(padded).rstrip()

    out = [line(list(headers)), line(["-" * w for w in widths])]
    out.extend(line(r) for r in rows)
    return "\n".join(out)


def render_balances(table: Mapping[str, Mapping[str, Decimal]]) -> str:
    """The output of :func:`balances` as a table, one line per account and currency."""
    rows = []
    for account, per in table.items():
        for currency, amount in per.items():
            rows.append([account, format_amount(Money(amount, currency))])
    return format_table(["account", "balance"], rows, align="lr")


def _percent(value: Decimal | None) -> str:
    if value is None:
        return "-"
    return f"{value:+}%" if value else "0.0%"


def render_monthly(changes: Sequence[Change], currency: str) -> str:
    """Month, total, difference and percent change, one line per month."""
    rows = []
    for change in changes:
        difference = "-" if change.difference is None else format_amount(Money(change.difference, currency))
        rows.append([
            change.label,
            format_amount(Money(change.amount, currency)),
            difference,
            _percent(change.percent),
        ])
    return format_table(["month", "total", "change", "%"], rows, align="lrrr")


def render_budget(lines: Sequence[BudgetLine]) -> str:
    """Account, budget, spent, remaining and share used; over-budget lines get a ``!``."""
    rows = []
    for line in lines:
        used = "-" if line.used_percent is None else f"{line.used_percent}%"
        rows.append([
            line.account + (" !" if line.over else ""),
            format_amount(Money(line.budget, line.currency)),
            format_amount(Money(line.spent, line.currency)),
            format_amount(Money(line.remaining, line.currency)),
            used,
        ])
    return format_table(["account", "budget", "spent", "remaining", "used"], rows, align="lrrrr")


def spending_by_account(
    journal: Journal,
    parent: str,
    first: Month,
    last: Month,
    *,
    currency: str,
    depth: int | None = None,
) -> dict[str, Decimal]:
    """Total posted to each account under ``parent`` over a range of months, largest first.

    ``depth`` groups sub-accounts to that many levels (``depth=2`` puts
    ``expenses:food:restaurants`` under ``expenses:food``).
    """
    start, _ = month_bounds(*first)
    _, end = month_bounds(*last)
    totals: dict[str, Decimal] = defaultdict(Decimal)
    for transaction in journal.between(start, end):
        for posting in transaction.postings:
            if posting.amount.currency != currency or not account_matches(posting.account, parent):
                continue
            totals[truncate_account(posting.account, depth)] += posting.amount.amount
    return dict(sorted(totals.items(), key=lambda kv: (-kv[1], kv[0])))
