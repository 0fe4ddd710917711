from datetime import date
from decimal import Decimal

import pytest

from ledger.journal import JournalError, account_matches, parse_journal
from ledger.money import Money

JOURNAL = """\
; household, first quarter
2024-01-01 * Opening balance
    assets:checking          2,000.00 EUR
    equity:opening

2024-01-31 * Rent
    expenses:housing           950.00 EUR
    assets:checking

2024/02/01 ! Grocery store  ; receipt in the drawer
    expenses:food               42.10 EUR
    expenses:household           7.90 EUR
    assets:cash                -50.00 EUR

2024-02-29 * Restaurant
    expenses:food:restaurants   31.50 EUR
    assets:checking
"""


def test_parses_headers_postings_and_comments():
    journal = parse_journal(JOURNAL)
    assert len(journal) == 4
    first = journal.transactions[0]
    assert (first.date, first.status, first.payee) == (date(2024, 1, 1), "*", "Opening balance")
    grocery = journal.transactions[2]
    assert grocery.status == "!"
    assert grocery.payee == "Grocery store"
    assert [p.account for p in grocery.postings] == ["expenses:food", "expenses:household", "assets:cash"]


def test_elided_amount_balances_the_transaction():
    journal = parse_journal(JOURNAL)
    rent = journal.transactions[1]
    assert rent.postings[1].amount == Money(Decimal("-950.00"), "EUR")
    opening = journal.transactions[0]
    assert opening.postings[1].amount == Money(Decimal("-2000.00"), "EUR")


def test_postings_with_grouped_amounts_balance():
    journal = parse_journal(
        "2024-03-01 Bonus\n    assets:checking  1,500 EUR\n    income:salary  -1,500 EUR\n"
    )
    assert journal.transactions[0].amount_for("assets", "EUR") == Decimal("1500")


def test_unbalanced_transaction_names_its_line():
    with pytest.raises(JournalError, match=r"line 2: transaction does not balance \(1.00 EUR\)"):
        parse_journal("; x\n2024-01-01 Oops\n    a:b  3.00 EUR\n    a:c  -2.00 EUR\n")


def test_errors_name_the_line():
    with pytest.raises(JournalError, match="line 1: expected a date"):
        parse_journal("Rent\n    a:b  1 EUR\n")
    with pytest.raises(JournalError, match="line 1: posting outside a transaction"):
        parse_journal("    a:b  1 EUR\n")
    with pytest.raises(JournalError, match="line 3: only one posting"):
        parse_journal("2024-01-01 x\n    a:b\n    a:c\n")
    with pytest.raises(JournalError, match="line 1: not a date"):
        parse_journal("2024-02-30 x\n    a:b  1 EUR\n    a:c\n")


def test_default_currency_applies_to_bare_numbers():
    journal = parse_journal("2024-01-01 x\n    a:b  5\n    a:c\n", default_currency="CHF")
    assert journal.transactions[0].postings[1].amount == Money(Decimal("-5"), "CHF")


def test_transactions_are_sorted_by_date_then_file_order():
    journal = parse_journal(
        "2024-01-02 b\n  x:y  1 EUR\n  x:z\n"
        "2024-01-01 a\n  x:y  1 EUR\n  x:z\n"
        "2024-01-02 c\n  x:y  1 EUR\n  x:z\n"
    )
    assert [t.payee for t in journal] == ["a", "b", "c"]


def test_between_includes_both_ends():
    journal = parse_journal(JOURNAL)
    payees = [t.payee for t in journal.between(date(2024, 1, 31), date(2024, 2, 29))]
    assert payees == ["Rent", "Grocery store", "Restaurant"]
    assert [t.payee for t in journal.between(date(2024, 1, 1), date(2024, 1, 1))] == ["Opening balance"]


def test_between_rejects_a_reversed_period():
    with pytest.raises(ValueError, match="before it starts"):
        parse_journal(JOURNAL).between(date(2024, 2, 1), date(2024, 1, 1))


def test_account_selection():
    journal = parse_journal(JOURNAL)
    assert [t.payee for t in journal.for_account("expenses:food")] == ["Grocery store", "Restaurant"]
    assert account_matches("expenses:food", "expenses")
    assert not account_matches("expensesx", "expenses")
    assert journal.accounts()[0] == "assets:cash"
    assert journal.currencies() == ["EUR"]
    assert (journal.first_date(), journal.last_date()) == (date(2024, 1, 1), date(2024, 2, 29))
