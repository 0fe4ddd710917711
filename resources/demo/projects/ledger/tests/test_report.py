from datetime import date
from decimal import Decimal

import pytest

from ledger.journal import parse_journal
from ledger.report import (
    BudgetLine,
    balances,
    budget_report,
    format_table,
    month_bounds,
    month_over_month,
    monthly_totals,
    months,
    percent_change,
    render_balances,
    render_budget,
    render_monthly,
    spending_by_account,
    truncate_account,
)

JOURNAL = parse_journal("""\
2023-11-30 * Groceries
    expenses:food             80.00 EUR
    assets:checking
2023-12-15 * Groceries
    expenses:food            120.00 EUR
    assets:checking
2023-12-31 * New year's eve dinner
    expenses:food:restaurants  60.00 EUR
    assets:checking
2024-01-10 * Groceries
    expenses:food            200.00 EUR
    assets:checking
2024-01-31 * Rent
    expenses:housing         950.00 EUR
    assets:checking
2024-02-03 * Groceries
    expenses:food            250.00 EUR
    assets:checking
2024-02-05 * Refund
    assets:checking           20.00 EUR
    expenses:food
2024-02-07 * Hotel
    expenses:travel          130.00 USD
    assets:card
""")


def test_truncate_account():
    assert truncate_account("expenses:food:restaurants", 2) == "expenses:food"
    assert truncate_account("expenses", 3) == "expenses"
    assert truncate_account("a:b", None) == "a:b"
    with pytest.raises(ValueError):
        truncate_account("a", 0)


def test_balances_roll_up_to_parents():
    table = balances(JOURNAL)
    assert table["expenses:food"] == {"EUR": Decimal("690.00")}
    assert table["expenses"] == {"EUR": Decimal("1640.00"), "USD": Decimal("130.00")}
    assert table["assets"]["EUR"] == Decimal("-1640.00")


def test_balances_with_depth_and_as_of():
    table = balances(JOURNAL, depth=1, as_of=date(2023, 12, 31))
    assert set(table) == {"assets", "expenses"}
    assert table["expenses"] == {"EUR": Decimal("260.00")}
    flat = balances(JOURNAL, roll_up=False)
    assert "expenses" not in flat


def test_month_bounds():
    assert month_bounds(2024, 2) == (date(2024, 2, 1), date(2024, 2, 29))
    assert month_bounds(2023, 4) == (date(2023, 4, 1), date(2023, 4, 30))
    with pytest.raises(ValueError):
        month_bounds(2024, 13)


def test_month_bounds_december():
    assert month_bounds(2023, 12) == (date(2023, 12, 1), date(2023, 12, 31))


def test_months_cross_the_year():
    assert months((2023, 11), (2024, 2)) == [(2023, 11), (2023, 12), (2024, 1), (2024, 2)]
    assert months((2024, 5), (2024, 5)) == [(2024, 5)]
    with pytest.raises(ValueError):
        months((2024, 2), (2024, 1))


def test_monthly_totals_within_a_year():
    totals = monthly_totals(JOURNAL, "expenses:food", (2024, 2), (2024, 3), currency="EUR")
    assert [(t.label, t.amount) for t in totals] == [("2024-02", Decimal("230.00")), ("2024-03", Decimal(0))]


def test_monthly_totals_count_the_last_day_of_the_month():
    totals = monthly_totals(JOURNAL, "expenses", (2024, 1), (2024, 1), currency="EUR")
    assert totals[0].amount == Decimal("1150.00")
    november = monthly_totals(JOURNAL, "expenses:food", (2023, 11), (2023, 11), currency="EUR")
    assert november[0].amount == Decimal("80.00")


def test_monthly_totals_across_new_year():
    totals = monthly_totals(JOURNAL, "expenses:food", (2023, 12), (2024, 1), currency="EUR")
    assert [(t.label, t.amount) for t in totals] == [
        ("2023-12", Decimal("180.00")),
        ("2024-01", Decimal("200.00")),
    ]


def test_percent_change():
    assert percent_change(Decimal(200), Decimal(250)) == Decimal("25.0")
    assert percent_change(Decimal(250), Decimal(200)) == Decimal("-20.0")
    assert percent_change(Decimal(-100), Decimal(-50)) == Decimal("50.0")
    assert percent_change(Decimal(3), Decimal(4)) == Decimal("33.3")
    assert percent_change(Decimal(0), Decimal(10)) is None


def test_month_over_month():
    totals = monthly_totals(JOURNAL, "expenses:food", (2024, 1), (2024, 2), currency="EUR")
    first, second = month_over_month(totals)
    assert (first.previous, first.difference, first.percent) == (None, None, None)
    assert second.previous == Decimal("200.00")
    assert second.difference == Decimal("30.00")
    assert second.percent == Decimal("15.0")


def test_render_monthly():
    totals = monthly_totals(JOURNAL, "expenses:food", (2024, 1), (2024, 3), currency="EUR")
    text = render_monthly(month_over_month(totals), "EUR")
    assert text.splitlines() == [
        "month         total       change        %",
        "-------  ----------  -----------  -------",
        "2024-01  200.00 EUR            -        -",
        "2024-02  230.00 EUR    30.00 EUR   +15.0%",
        "2024-03    0.00 EUR  -230.00 EUR  -100.0%",
    ]


def test_month_over_month_needs_one_currency():
    eur = monthly_totals(JOURNAL, "expenses", (2024, 2), (2024, 2), currency="EUR")
    usd = monthly_totals(JOURNAL, "expenses", (2024, 2), (2024, 2), currency="USD")
    with pytest.raises(ValueError, match="one currency"):
        month_over_month(eur + usd)


def test_budget_report_counts_refunds_and_sub_accounts():
    lines = budget_report(JOURNAL, {"expenses:food": 300, "expenses:travel": "0"}, 2024, 2, currency="EUR")
    food, travel = lines
    assert (food.spent, food.remaining, food.used_percent, food.over) == (
        Decimal("230.00"), Decimal("70.00"), Decimal("76.7"), False,
    )
    assert travel.used_percent is None


def test_budget_line_over_budget():
    line = BudgetLine("expenses:food", Decimal(100), Decimal("125.5"), "EUR")
    assert line.over
    assert line.remaining == Decimal("-25.5")
    assert line.used_percent == Decimal("125.5")


def test_render_budget_and_balances():
    lines = budget_report(JOURNAL, {"expenses:food": 200}, 2024, 2, currency="EUR")
    row = render_budget(lines).splitlines()[2]
    assert row == "expenses:food !  200.00 EUR  230.00 EUR  -30.00 EUR  115.0%"
    table = render_balances({"assets": {"EUR": Decimal("-1234.5")}})
    assert table.splitlines()[2] == "assets   -1,234.50 EUR"


def test_format_table_checks_shapes():
    assert format_table(["a", "b"], [["x", "10"]], align="lr").splitlines() == ["a   b", "-  --", "x  10"]
    with pytest.raises(ValueError):
        format_table(["a", "b"], [["x"]])


def test_spending_by_account_groups_and_sorts():
    spending = spending_by_account(JOURNAL, "expenses", (2023, 12), (2024, 1), currency="EUR", depth=2)
    assert spending == {
        "expenses:housing": Decimal("950.00"),
        "expenses:food": Decimal("380.00"),
    }
