"""Arithmetic and consistency checks, and what they do to confidence.

A check never changes a value. A failed check halves the confidence of every value it
involves (one of them was misread, or the invoice is wrong); a passed check halves the
distance to 1 of each (two independent readings agree). Amounts are compared to the
cent, with one cent of slack per rounded addend.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import date
from decimal import Decimal

from pagemill.invoices.items import mentions_inclusion
from pagemill.invoices.schemas import (
    Check,
    CheckStatus,
    FieldValue,
    Invoice,
    LineItem,
    Verdict,
)

CENT = Decimal("0.01")
FAILED_FACTOR = 0.5
PASSED_PULL = 0.5


def run_checks(invoice: Invoice, currencies: set[str]) -> None:
    checks = [
        _line_items_sum(invoice),
        _subtotal_plus_tax(invoice),
        *_quantity_times_price(invoice.line_items),
        _due_after_issue(invoice),
        _one_currency(currencies),
    ]
    invoice.checks = checks
    failed = [check for check in checks if check.status is CheckStatus.FAILED]
    invoice.failed_checks = sorted({check.name for check in failed})
    if failed:
        invoice.verdict = Verdict.INCONSISTENT
    elif any(check.status is CheckStatus.PASSED for check in checks):
        invoice.verdict = Verdict.CONSISTENT
    else:
        invoice.verdict = Verdict.UNCHECKED
    _adjust_confidence(invoice, checks)


def _amount(value: FieldValue | None) -> Decimal | None:
    return Decimal(value.value) if value is not None else None


def _close(a: Decimal, b: Decimal, addends: int = 1) -> bool:
    return abs(a - b) <= CENT * max(1, addends)


def _not_applicable(name: str, why: str) -> Check:
    return Check(name=name, status=CheckStatus.NOT_APPLICABLE, fields=[], detail=why)


def _outcome(name: str, fields: list[str], passed: bool, if_passed: str, if_failed: str) -> Check:
    """A check that could be made: passed or failed, with what it saw either way."""
    return Check(
        name=name,
        status=CheckStatus.PASSED if passed else CheckStatus.FAILED,
        fields=fields,
        detail=if_passed if passed else if_failed,
    )


def _line_items_sum(invoice: Invoice) -> Check:
    name = "line_items_sum"
    counted = [
        (index, item)
        for index, item in enumerate(invoice.line_items)
        if not item.included_in_previous and item.amount is not None
    ]
    if not counted:
        return _not_applicable(name, "no line item amounts")
    unread = [
        index + 1
        for index, item in enumerate(invoice.line_items)
        if not item.included_in_previous and item.amount is None
    ]
    if unread:
        return _not_applicable(name, f"no amount read on line {unread[0]}")
    # Lines are printed net (summing to the subtotal) or with their tax (to the total).
    targets = [(field, _amount(invoice.fields.get(field))) for field in ("subtotal", "total")]
    present = [(field, value) for field, value in targets if value is not None]
    if not present:
        return _not_applicable(name, "neither a subtotal nor a total")
    readings = [(counted, "")]
    maybe_included = [index for index, item in counted if mentions_inclusion(item)]
    if maybe_included:
        without = [(index, item) for index, item in counted if index not in maybe_included]
        lines = ", ".join(str(index + 1) for index in maybe_included)
        readings.append((without, f" (line {lines} taken as part of the line above)"))
    for lines_read, note in readings:
        total = _sum_amounts(lines_read)
        for field, value in present:
            if _close(total, value, len(lines_read)):
                return Check(
                    name=name,
                    status=CheckStatus.PASSED,
                    fields=[*(f"line_items[{index}].amount" for index, _ in lines_read), field],
                    detail=f"line items sum to {total}, the {field}{note}",
                )
    said = ", ".join(f"{field} {value}" for field, value in present)
    return Check(
        name=name,
        status=CheckStatus.FAILED,
        fields=[
            *(f"line_items[{index}].amount" for index, _ in counted),
            *(field for field, _ in present),
        ],
        detail=f"line items sum to {_sum_amounts(counted)}; printed: {said}",
    )


def _sum_amounts(lines: list[tuple[int, LineItem]]) -> Decimal:
    return sum((Decimal(item.amount.value) for _, item in lines if item.amount), Decimal(0))


def _subtotal_plus_tax(invoice: Invoice) -> Check:
    name = "subtotal_plus_tax_equals_total"
    subtotal = _amount(invoice.fields.get("subtotal"))
    tax = _amount(invoice.fields.get("tax_amount"))
    total_field = "total" if "total" in invoice.fields else "amount_due"
    total = _amount(invoice.fields.get(total_field))
    if subtotal is None or tax is None or total is None:
        return _not_applicable(name, "subtotal, tax or total not found")
    return _outcome(
        name,
        ["subtotal", "tax_amount", total_field],
        _close(subtotal + tax, total, 2),
        f"{subtotal} + {tax} = {total}",
        f"{subtotal} + {tax} = {subtotal + tax}, but the {total_field} is {total}",
    )


def _quantity_times_price(items: list[LineItem]) -> Iterable[Check]:
    name = "quantity_times_unit_price"
    for index, item in enumerate(items):
        quantity, price, amount = (
            _amount(item.quantity),
            _amount(item.unit_price),
            _amount(item.amount),
        )
        if quantity is None or price is None or amount is None:
            continue
        discount = _amount(item.discount_percent) or Decimal(0)
        net = quantity * price * (1 - discount / 100)
        expected = [net]
        # The line's amount may include its tax, given as an amount or as a rate.
        if item.tax_amount is not None:
            expected.append(net + Decimal(item.tax_amount.value))
        if item.tax_rate is not None:
            expected.append(net * (1 + Decimal(item.tax_rate.value) / 100))
        prefix = f"line_items[{index}]"
        yield _outcome(
            name,
            [f"{prefix}.quantity", f"{prefix}.unit_price", f"{prefix}.amount"],
            any(_close(value, amount, 2) for value in expected),
            f"line {index + 1}: {quantity} x {price} = {amount}",
            f"line {index + 1}: {quantity} x {price} = {net.quantize(CENT)}, "
            f"but the amount is {amount}",
        )


def _due_after_issue(invoice: Invoice) -> Check:
    name = "due_date_not_before_issue_date"
    issue, due = invoice.fields.get("issue_date"), invoice.fields.get("due_date")
    if issue is None or due is None:
        return _not_applicable(name, "issue or due date not found")
    return _outcome(
        name,
        ["issue_date", "due_date"],
        date.fromisoformat(due.value) >= date.fromisoformat(issue.value),
        f"due {due.value}, issued {issue.value}",
        f"due {due.value} is before the issue date {issue.value}",
    )


def _one_currency(currencies: set[str]) -> Check:
    name = "one_currency"
    if not currencies:
        return _not_applicable(name, "no currency printed")
    return _outcome(
        name,
        ["currency"],
        len(currencies) == 1,
        f"every amount in {next(iter(currencies))}",
        f"amounts in {', '.join(sorted(currencies))}",
    )


def _adjust_confidence(invoice: Invoice, checks: list[Check]) -> None:
    factors: dict[str, list[Check]] = {}
    for check in checks:
        for field in check.fields:
            factors.setdefault(field, []).append(check)
    for field, involved in factors.items():
        value = _resolve(invoice, field)
        if value is None:
            continue
        confidence = value.confidence
        for check in involved:
            if check.status is CheckStatus.FAILED:
                confidence *= FAILED_FACTOR
            elif check.status is CheckStatus.PASSED:
                confidence += (1 - confidence) * PASSED_PULL
        value.confidence = round(confidence, 3)


def _resolve(invoice: Invoice, path: str) -> FieldValue | None:
    if not path.startswith("line_items["):
        return invoice.fields.get(path)
    index_text, attribute = path[len("line_items[") :].split("].")
    item = invoice.line_items[int(index_text)]
    found = getattr(item, attribute)
    return found if isinstance(found, FieldValue) else None
