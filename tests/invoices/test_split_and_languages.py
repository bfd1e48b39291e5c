from __future__ import annotations

import pymupdf
import pytest

from pagemill.invoices import extract_invoices
from pagemill.invoices.schemas import Verdict
from tests.invoices.support import CORPUS, pdf_blocks, written_page


def test_a_file_of_several_invoices_is_split_by_their_numbers() -> None:
    joined = pymupdf.open()
    for name in ("coolblue1", "AzureInterior", "saeco"):
        with pymupdf.open(CORPUS / f"{name}.pdf") as document:
            joined.insert_pdf(document)
    invoices = extract_invoices(pdf_blocks(joined)).invoices
    assert [(invoice.first_page, invoice.last_page) for invoice in invoices] == [
        (1, 1),
        (2, 2),
        (3, 3),
    ]
    numbers = [invoice.fields["invoice_number"].value for invoice in invoices]
    assert numbers == ["993548900", "INV/2023/03/0008", "VF1005193039"]
    assert all(invoice.verdict is Verdict.CONSISTENT for invoice in invoices)


def test_a_page_counter_that_restarts_starts_a_new_invoice() -> None:
    pages = [
        written_page([(40, 40, "Invoice number: A-1001"), (40, 800, "Page 1 of 2")], 1),
        written_page([(40, 40, "Total: 10.00 EUR"), (40, 800, "Page 2 of 2")], 2),
        written_page([(40, 40, "Amount due: 5.00 EUR"), (40, 800, "Page 1 of 1")], 3),
    ]
    invoices = extract_invoices(pages).invoices
    assert [(invoice.first_page, invoice.last_page) for invoice in invoices] == [(1, 2), (3, 3)]
    assert invoices[0].fields["total"].value == "10.00"
    assert invoices[0].fields["total"].page == 2


def test_a_continuation_page_without_a_number_stays_with_its_invoice() -> None:
    pages = [
        written_page([(40, 40, "Invoice No: 77001")], 1),
        written_page([(40, 40, "Grand total: $ 12.50")], 2),
    ]
    invoices = extract_invoices(pages).invoices
    assert len(invoices) == 1
    assert invoices[0].fields["currency"].value == "USD"


LANGUAGES = {
    "de": [
        (40, 40, "Rechnungsnummer: RE-2024-0117"),
        (40, 60, "Rechnungsdatum: 12. März 2024"),
        (40, 80, "Fällig am: 26.03.2024"),
        (40, 200, "Nettobetrag            1.000,00 €"),
        (40, 220, "MwSt. 19 %             190,00 €"),
        (40, 240, "Gesamtbetrag           1.190,00 €"),
    ],
    "fr": [
        (40, 40, "N° de facture : FA-2024-031"),
        (40, 60, "Date de facture : 3 février 2024"),
        (40, 80, "Date d'échéance : 04/03/2024"),
        (40, 200, "Total HT               1 000,00 €"),
        (40, 220, "TVA 20 %               200,00 €"),
        (40, 240, "Total TTC              1 200,00 €"),
    ],
    "nl": [
        (40, 40, "Factuurnummer: 2024-0042"),
        (40, 60, "Factuurdatum: 5 mei 2024"),
        (40, 80, "Vervaldatum: 19-05-2024"),
        (40, 200, "Subtotaal              € 1.000,00"),
        (40, 220, "BTW 21%                € 210,00"),
        (40, 240, "Totaal                 € 1.210,00"),
    ],
    "es": [
        (40, 40, "Número de factura: F-2024-88"),
        (40, 60, "Fecha de factura: 15 de enero de 2024"),
        (40, 80, "Fecha de vencimiento: 14/02/2024"),
        (40, 200, "Base imponible         1.000,00 €"),
        (40, 220, "IVA 21%                210,00 €"),
        (40, 240, "Total                  1.210,00 €"),
    ],
    "it": [
        (40, 40, "Numero fattura: 2024/117"),
        (40, 60, "Data fattura: 7 settembre 2024"),
        (40, 80, "Data di scadenza: 07/10/2024"),
        (40, 200, "Imponibile             1.000,00 €"),
        (40, 220, "IVA 22%                220,00 €"),
        (40, 240, "Totale                 1.220,00 €"),
    ],
}
EXPECTED = {
    "de": ("RE-2024-0117", "2024-03-12", "2024-03-26", "1190.00", "19"),
    "fr": ("FA-2024-031", "2024-02-03", "2024-03-04", "1200.00", "20"),
    "nl": ("2024-0042", "2024-05-05", "2024-05-19", "1210.00", "21"),
    "es": ("F-2024-88", "2024-01-15", "2024-02-14", "1210.00", "21"),
    "it": ("2024/117", "2024-09-07", "2024-10-07", "1220.00", "22"),
}


@pytest.mark.parametrize("language", sorted(LANGUAGES))
def test_labels_in_each_language(language: str) -> None:
    invoice = extract_invoices([written_page(LANGUAGES[language])]).invoices[0]
    fields = {name: value.value for name, value in invoice.fields.items()}
    number, issued, due, total, rate = EXPECTED[language]
    assert invoice.language == language
    assert (fields["invoice_number"], fields["issue_date"], fields["due_date"]) == (
        number,
        issued,
        due,
    )
    assert (fields["total"], fields["currency"], fields["tax_rate"]) == (total, "EUR", rate)
    assert invoice.verdict is Verdict.CONSISTENT, invoice.checks
