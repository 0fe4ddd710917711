"""The journal: dated transactions with balanced postings, read from plain text.

A journal looks like this::

    ; household, 2024
    2024-03-01 * Rent
        expenses:housing        950.00 EUR
        assets:checking

    2024/03/02 ! Grocery store  ; receipt in the drawer
        expenses:food            42.10 EUR
        expenses:household        7.90 EUR
        assets:cash             -50.00 EUR

A transaction starts with a date (``YYYY-MM-DD`` or ``YYYY/MM/DD``) at the beginning of a
line, an optional status mark (``*`` cleared, ``!`` pending) and the payee. The indented
lines below it are its postings: an account name, at least two spaces, and an amount. One
posting per currency may leave out its amount; it receives whatever balances the
transaction. A ``;`` starts a comment, on its own line or after the text.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from datetime import date
from decimal import Decimal

from ledger.money import AmountError, Money, parse_amount

__all__ = [
    "Journal",
    "JournalError",
    "Posting",
    "Transaction",
    "account_matches",
    "parse_journal",
]

_HEADER = re.compile(r"(?P<date>\d{4}[-/]\d{2}[-/]\d{2})(?:\s+(?P<status>[*!]))?\s*(?P<payee>.*)")
_POSTING = re.compile(r"(?P<account>\S(?:.*?\S)?)(?:\s{2,}|\t+)(?P<amount>\S.*)")
_ACCOUNT = re.compile(r"[^\s:;]+(?: [^\s:;]+)*(?::[^\s:;]+(?: [^\s:;]+)*)*")


class JournalError(ValueError):
    """A journal that cannot be read; the message starts with the line number."""

    def __init__(self, line: int, message: str) -> None:
        super().__init__(f"line {line}: {message}")
        self.line = line


@dataclass(frozen=True)
class Posting:
    """One account's share of a transaction."""

    account: str
    amount: Money


@dataclass(frozen=True)
class Transaction:
    """A dated, balanced set of postings."""

    date: date
    payee: str
    postings: tuple[Posting, ...]
    status: str = ""
    line: int = 0

    def amount_for(self, account: str, currency: str) -> Decimal:
        """The sum of this transaction's postings to ``account`` (or its sub-accounts)."""
        return sum(
            (p.amount.amount for p in self.postings if account_matches(p.account, account)
             and p.amount.currency == currency),
            Decimal(0),
        )

    def touches(self, account: str) -> bool:
        return any(account_matches(p.account, account) for p in self.postings)


def account_matches(account: str, prefix: str) -> bool:
    """Whether ``account`` is ``prefix`` or one of its sub-accounts.

    >>> account_matches("expenses:food:restaurants", "expenses:food")
    True
    >>> account_matches("expenses:foodbank", "expenses:food")
    False
    """
    return account == prefix or account.startswith(prefix + ":")


@dataclass
class Journal:
    """The transactions of a journal, in date order (file order within a day)."""

    transactions: list[Transaction] = field(default_factory=list)

    def __iter__(self) -> Iterator[Transaction]:
        return iter(self.transactions)

    def __len__(self) -> int:
        return len(self.transactions)

    def between(self, start: date, end: date) -> list[Transaction]:
        """The transactions dated from ``start`` to ``end``, both days included."""
        if end < start:
            raise ValueError(f"period ends ({end}) before it starts ({start})")
        return [t for t in self.transactions if start <= t.date <= end]

    def for_account(self, account: str) -> list[Transaction]:
        """The transactions with a posting to ``account`` or one of its sub-accounts."""
        return [t for t in self.transactions if t.touches(account)]

    def accounts(self) -> list[str]:
        """Every account that has a posting, sorted."""
        return sorted({p.account for t in self.transactions for p in t.postings})

    def currencies(self) -> list[str]:
        return sorted({p.amount.currency for t in self.transactions for p in t.postings})

    def first_date(self) -> date | None:
        return self.transactions[0].date if self.transactions else None

    def last_date(self) -> date | None:
        return self.transactions[-1].date if self.transactions else None


def _strip_comment(line: str) -> str:
    index = line.find(";")
    return (line[:index] if index >= 0 else line).rstrip()


def _parse_date(text: str, line: int) -> date:
    try:
        return date.fromisoformat(text.replace("/", "-"))
    except ValueError:
        raise JournalError(line, f"not a date: {text!r}") from None


def _balance(postings: list[tuple[str, Money | None, int]], header_line: int) -> tuple[Posting, ...]:
    """Fill in elided amounts and check that every currency sums to zero."""
    totals: dict[str, Decimal] = {}
    for _, amount, _ in postings:
        if amount is not None:
            totals[amount.currency] = totals.get(amount.currency, Decimal(0)) + amount.amount
    elided = [i for i, (_, amount, _) in enumerate(postings) if amount is None]
    if len(elided) > 1:
        raise JournalError(postings[elided[1]][2], "only one posting may leave out its amount")
    unbalanced = {c: v for c, v in totals.items() if v != 0}
    result: list[Posting] = []
    for account, amount, _ in postings:
        if amount is None:
            if len(unbalanced) > 1:
                raise JournalError(header_line, "an elided amount cannot balance several currencies")
            if not unbalanced:
                raise JournalError(header_line, "nothing to balance with the elided amount")
            (currency, value), = unbalanced.items()
            amount = Money(-value, currency)
            unbalanced = {}
        result.append(Posting(account, amount))
    if unbalanced:
        sums = ", ".join(f"{v} {c}" for c, v in sorted(unbalanced.items()))
        raise JournalError(header_line, f"transaction does not balance ({sums})")
    if len(result) < 2:
        raise JournalError(header_line, "a transaction needs at least two postings")
    return tuple(result)


def parse_journal(text: str | Iterable[str], *, default_currency: str | None = None) -> Journal:
    """Read a journal (see the module docstring) into a :class:`Journal`.

    Raises :class:`JournalError` naming the line for the first problem found.
    """
    lines = text.splitlines() if isinstance(text, str) else list(text)
    transactions: list[Transaction] = []
    header: tuple[date, str, str, int] | None = None
    postings: list[tuple[str, Money | None, int]] = []

    def close() -> None:
        nonlocal header, postings
        if header is not None:
            day, status, payee, line = header
            transactions.append(Transaction(day, payee, _balance(postings, line), status, line))
        header, postings = None, []

    for number, raw in enumerate(lines, start=1):
        content = _strip_comment(raw)
        if not content.strip():
            continue
        if not content[0].isspace():
            close()
            match = _HEADER.fullmatch(content)
            if match is None:
                raise JournalError(number, f"expected a date at the start of {content!r}")
            day = _parse_date(match["date"], number)
            header = (day, match["status"] or "", match["payee"].strip(), number)
            continue
        if header is None:
            raise JournalError(number, "posting outside a transaction")
        body = content.strip()
        match = _POSTING.fullmatch(body)
        account, amount_text = (match["account"], match["amount"]) if match else (body, None)
        if not _ACCOUNT.fullmatch(account):
            raise JournalError(number, f"not an account name: {account!r}")
        amount = None
        if amount_text is not None:
            try:
                amount = parse_amount(amount_text, default_currency)
            except AmountError as exc:
                raise JournalError(number, str(exc)) from None
        postings.append((account, amount, number))
    close()
    transactions.sort(key=lambda t: (t.date, t.line))
    return Journal(transactions)
