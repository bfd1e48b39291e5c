"""What invoice.json holds: each value as printed and normalised, where it was read."""

from __future__ import annotations

from enum import StrEnum

from pydantic import BaseModel, Field

from pagemill.documents.blocks import Box

INVOICE_SCHEMA_VERSION = 1


class FieldValue(BaseModel):
    printed: str  # the characters the value was read from, as printed
    # Normalised: ISO 8601 date, decimal amount or rate as a string (exact), ISO 4217
    # currency code, or the text with its whitespace collapsed.
    value: str
    page: int
    box: Box
    source_text: str  # the whole line or cell the value came from
    label: str | None = None  # the label that located it, as printed
    confidence: float = Field(ge=0, le=1)


class Party(BaseModel):
    name: FieldValue | None = None
    address: FieldValue | None = None
    tax_id: FieldValue | None = None


class LineItem(BaseModel):
    description: FieldValue | None = None
    quantity: FieldValue | None = None
    unit: FieldValue | None = None
    unit_price: FieldValue | None = None
    tax_rate: FieldValue | None = None
    tax_amount: FieldValue | None = None
    discount_percent: FieldValue | None = None
    amount: FieldValue | None = None
    # A row such as "incl. recycling fee": its amount is part of the row before it.
    included_in_previous: bool = False


class CheckStatus(StrEnum):
    PASSED = "passed"
    FAILED = "failed"
    NOT_APPLICABLE = "not_applicable"  # a value it needs was not found


class Check(BaseModel):
    name: str
    status: CheckStatus
    fields: list[str]  # the fields it involves ("total", "line_items[2].amount", ...)
    detail: str


class Verdict(StrEnum):
    CONSISTENT = "consistent"  # every applicable check passed, at least one applied
    INCONSISTENT = "inconsistent"  # at least one check failed: see failed_checks
    UNCHECKED = "unchecked"  # no check had the values it needs


class Invoice(BaseModel):
    first_page: int
    last_page: int
    language: str | None = None  # the language most of its labels were read in
    fields: dict[str, FieldValue] = Field(default_factory=dict)
    seller: Party = Field(default_factory=Party)
    buyer: Party = Field(default_factory=Party)
    line_items: list[LineItem] = Field(default_factory=list)
    checks: list[Check] = Field(default_factory=list)
    verdict: Verdict = Verdict.UNCHECKED
    failed_checks: list[str] = Field(default_factory=list)


class InvoiceDocument(BaseModel):
    schema_version: int = INVOICE_SCHEMA_VERSION
    invoices: list[Invoice] = Field(default_factory=list)
