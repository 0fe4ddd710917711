"""ledger: plain-text double-entry bookkeeping."""

from ledger.journal import Journal, JournalError, Posting, Transaction, parse_journal
from ledger.money import AmountError, Money, parse_amount

__version__ = "1.2.0"

__all__ = [
    "AmountError",
    "Journal",
    "JournalError",
    "Money",
    "Posting",
    "Transaction",
    "parse_amount",
    "parse_journal",
]
