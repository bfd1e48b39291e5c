"""`pagemill convert --extract invoice`: invoice.json beside document.md, no servers."""

from __future__ import annotations

from pathlib import Path

from typer.testing import CliRunner

from cli.main import app
from pagemill.invoices.schemas import InvoiceDocument
from tests.invoices.support import CORPUS


def test_convert_writes_the_invoice_beside_the_markdown(tmp_path: Path) -> None:
    result = CliRunner().invoke(
        app,
        ["convert", str(CORPUS / "AzureInterior.pdf"), "-o", str(tmp_path), "--extract", "invoice"],
    )
    assert result.exit_code == 0, result.output
    folder = tmp_path / "AzureInterior"
    document = InvoiceDocument.model_validate_json((folder / "invoice.json").read_text())
    invoice = document.invoices[0]
    assert invoice.fields["invoice_number"].value == "INV/2023/03/0008"
    assert invoice.fields["total"].value == "279.84"
    assert invoice.verdict == "consistent"
    assert (folder / "document.md").exists()


def test_convert_refuses_an_unknown_extraction(tmp_path: Path) -> None:
    result = CliRunner().invoke(
        app, ["convert", str(CORPUS / "oyo.pdf"), "-o", str(tmp_path), "--extract", "receipt"]
    )
    assert result.exit_code != 0
    assert not (tmp_path / "oyo").exists()
