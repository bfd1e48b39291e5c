"""Labels of invoice fields in English, German, French, Dutch, Spanish and Italian.

Labels are written as `normalise_label` leaves them: lower case, no accents, any run
of punctuation or spaces one space. Each has a weight: how surely that label names
the field (a bare "Date" may be the order date; "Invoice date" cannot). The longest
label that starts a line wins, so "Invoice date" is never read as "Invoice".
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass

EN, DE, FR, NL, ES, IT = "en", "de", "fr", "nl", "es", "it"


@dataclass(frozen=True)
class Label:
    field: str
    text: str  # normalised
    language: str
    weight: float


def normalise_label(text: str) -> str:
    decomposed = unicodedata.normalize("NFKD", text)
    plain = "".join(char for char in decomposed if not unicodedata.combining(char))
    return re.sub(r"[\W_]+", " ", plain.lower()).strip()


# field -> {language: [(label, weight)]}
_HEADER: dict[str, dict[str, list[tuple[str, float]]]] = {
    "invoice_number": {
        EN: [
            ("invoice number", 1.0),
            ("invoice no", 1.0),
            ("invoice nr", 1.0),
            ("invoice num", 1.0),
            ("invoice id", 1.0),
            ("invoice", 0.7),
            ("invoice reference", 0.9),
            ("bill number", 0.9),
            ("bill no", 0.9),
            ("receipt number", 0.8),
            ("receipt no", 0.8),
            # Hotel receipts and folios are identified by their booking.
            ("booking id", 0.6),
            ("booking number", 0.6),
            ("booking reference", 0.6),
        ],
        DE: [
            ("rechnungsnummer", 1.0),
            ("rechnungs nr", 1.0),
            ("rechnung nr", 1.0),
            ("rechnungsnr", 1.0),
            ("rechnung", 0.7),
            ("belegnummer", 0.8),
            ("buchungsnummer", 0.6),
        ],
        FR: [
            ("n de facture", 1.0),
            ("no de facture", 1.0),
            ("numero de facture", 1.0),
            ("facture n", 1.0),
            ("facture no", 1.0),
            ("num facture", 1.0),
            ("facture", 0.7),
            ("numero de reservation", 0.6),
        ],
        NL: [
            ("factuurnummer", 1.0),
            ("factuur nummer", 1.0),
            ("factuurnr", 1.0),
            ("factuur nr", 1.0),
            ("factuur", 0.7),
            ("reserveringsnummer", 0.6),
        ],
        ES: [
            ("numero de factura", 1.0),
            ("n de factura", 1.0),
            ("no de factura", 1.0),
            ("factura n", 1.0),
            ("factura no", 1.0),
            ("num factura", 1.0),
            ("factura", 0.7),
            ("numero de reserva", 0.6),
        ],
        IT: [
            ("numero fattura", 1.0),
            ("n fattura", 1.0),
            ("fattura n", 1.0),
            ("fattura nr", 1.0),
            ("numero documento", 0.8),
            ("fattura", 0.7),
            ("numero prenotazione", 0.6),
        ],
    },
    "issue_date": {
        EN: [
            ("invoice date", 1.0),
            ("date of invoice", 1.0),
            ("issue date", 1.0),
            ("date of issue", 1.0),
            ("billing date", 0.9),
            ("bill date", 0.9),
            ("tax point date", 0.8),
            ("date", 0.6),
        ],
        DE: [
            ("rechnungsdatum", 1.0),
            ("rechnungs datum", 1.0),
            ("ausstellungsdatum", 1.0),
            ("belegdatum", 0.9),
            ("datum", 0.6),
        ],
        FR: [
            ("date de facture", 1.0),
            ("date de facturation", 1.0),
            ("date d emission", 1.0),
            ("date", 0.6),
        ],
        NL: [("factuurdatum", 1.0), ("factuur datum", 1.0), ("datum", 0.6)],
        ES: [
            ("fecha de factura", 1.0),
            ("fecha factura", 1.0),
            ("fecha de emision", 1.0),
            ("fecha", 0.6),
        ],
        IT: [
            ("data fattura", 1.0),
            ("data documento", 0.9),
            ("data di emissione", 1.0),
            ("data", 0.6),
        ],
    },
    "due_date": {
        EN: [("due date", 1.0), ("payment due", 0.9), ("date due", 1.0), ("pay by", 0.8)],
        DE: [("falligkeitsdatum", 1.0), ("fallig am", 1.0), ("zahlbar bis", 1.0), ("fallig", 0.8)],
        FR: [("date d echeance", 1.0), ("echeance", 0.9), ("a payer avant le", 0.9)],
        NL: [("vervaldatum", 1.0), ("te betalen voor", 0.9), ("uiterste betaaldatum", 1.0)],
        ES: [("fecha de vencimiento", 1.0), ("vencimiento", 0.9)],
        IT: [("data di scadenza", 1.0), ("scadenza", 0.9)],
    },
    "subtotal": {
        EN: [
            ("subtotal", 0.9),
            ("sub total", 0.9),
            ("net amount", 1.0),
            ("net total", 1.0),
            ("total net", 1.0),
            ("total excl vat", 1.0),
            ("total excluding tax", 1.0),
            ("amount excl vat", 1.0),
            ("untaxed amount", 1.0),
            ("taxable amount", 0.9),
        ],
        DE: [
            ("zwischensumme", 0.9),
            ("nettobetrag", 1.0),
            ("summe netto", 1.0),
            ("gesamt netto", 1.0),
            ("netto", 0.8),
        ],
        FR: [
            ("sous total", 0.9),
            ("total ht", 1.0),
            ("montant ht", 1.0),
            ("total hors taxes", 1.0),
        ],
        NL: [
            ("subtotaal", 0.9),
            ("exclusief btw", 1.0),
            ("excl btw", 1.0),
            ("totaal excl btw", 1.0),
            ("grondslag", 1.0),
            ("netto bedrag", 1.0),
        ],
        ES: [("subtotal", 0.9), ("base imponible", 1.0), ("importe neto", 1.0)],
        IT: [("subtotale", 0.9), ("imponibile", 1.0), ("totale imponibile", 1.0)],
    },
    "tax_amount": {
        EN: [
            ("tax", 0.8),
            ("vat", 0.8),
            ("sales tax", 0.9),
            ("vat amount", 1.0),
            ("tax amount", 1.0),
            ("total tax", 1.0),
            ("gst", 0.8),
        ],
        DE: [
            ("mwst", 0.8),
            ("ust", 0.8),
            ("mehrwertsteuer", 0.9),
            ("umsatzsteuer", 0.9),
            ("mwst betrag", 1.0),
        ],
        FR: [("tva", 0.8), ("montant tva", 1.0), ("total tva", 1.0)],
        NL: [("btw", 0.8), ("btw bedrag", 1.0), ("totaal btw", 1.0)],
        ES: [("iva", 0.8), ("cuota iva", 1.0), ("importe iva", 1.0), ("total iva", 1.0)],
        IT: [("iva", 0.8), ("imposta", 0.9), ("totale iva", 1.0)],
    },
    "total": {
        EN: [
            ("total", 0.8),
            ("grand total", 1.0),
            ("invoice total", 1.0),
            ("total amount", 0.9),
            ("total for this invoice", 1.0),
            ("total incl vat", 1.0),
            ("amount", 0.5),
        ],
        DE: [
            ("gesamtbetrag", 1.0),
            ("rechnungsbetrag", 1.0),
            ("summe", 0.7),
            ("gesamtsumme", 1.0),
            ("gesamt", 0.7),
            ("endbetrag", 1.0),
            ("total", 0.8),
        ],
        FR: [("total ttc", 1.0), ("montant ttc", 1.0), ("total", 0.8), ("net a payer", 0.9)],
        NL: [
            ("totaal", 0.8),
            ("factuur totaal", 1.0),
            ("factuurtotaal", 1.0),
            ("totaalbedrag", 1.0),
            ("totaal incl btw", 1.0),
        ],
        ES: [("total", 0.8), ("importe total", 1.0), ("total factura", 1.0)],
        IT: [("totale", 0.8), ("totale fattura", 1.0), ("totale documento", 1.0)],
    },
    "amount_due": {
        EN: [
            ("amount due", 1.0),
            ("total amount due", 1.0),
            ("balance due", 1.0),
            ("total due", 1.0),
            ("amount payable", 0.9),
        ],
        DE: [("zahlbetrag", 1.0), ("offener betrag", 1.0), ("zu zahlen", 0.9)],
        FR: [("montant du", 1.0), ("reste a payer", 1.0), ("solde du", 1.0)],
        NL: [("te betalen", 1.0), ("openstaand bedrag", 1.0)],
        ES: [("importe a pagar", 1.0), ("total a pagar", 1.0)],
        IT: [("importo dovuto", 1.0), ("totale da pagare", 1.0), ("netto a pagare", 1.0)],
    },
    "purchase_order": {
        EN: [
            ("purchase order", 1.0),
            ("po number", 1.0),
            ("po no", 1.0),
            ("order number", 0.8),
            ("order no", 0.8),
            ("order id", 0.8),
            ("order", 0.5),
        ],
        DE: [("bestellnummer", 0.9), ("auftragsnummer", 0.8), ("bestellung", 0.6)],
        FR: [("bon de commande", 1.0), ("numero de commande", 0.9), ("commande", 0.6)],
        NL: [("ordernummer", 0.9), ("bestelnummer", 0.9), ("inkooporder", 1.0), ("order", 0.5)],
        ES: [("orden de compra", 1.0), ("numero de pedido", 0.9), ("pedido", 0.6)],
        IT: [("ordine di acquisto", 1.0), ("numero ordine", 0.9), ("ordine", 0.6)],
    },
    "payment_reference": {
        EN: [
            ("payment reference", 1.0),
            ("payment ref", 1.0),
            ("remittance reference", 1.0),
            ("please use the following communication for your payment", 1.0),
        ],
        DE: [("verwendungszweck", 1.0), ("zahlungsreferenz", 1.0)],
        FR: [("reference de paiement", 1.0), ("communication", 0.7)],
        NL: [("betalingskenmerk", 1.0), ("betaalkenmerk", 1.0), ("omschrijving betaling", 0.8)],
        ES: [("referencia de pago", 1.0)],
        IT: [("causale", 0.8), ("riferimento pagamento", 1.0)],
    },
    # Parties and their tax ids: located here, read by parties.py.
    "buyer": {
        EN: [
            ("bill to", 1.0),
            ("billed to", 1.0),
            ("billing address", 1.0),
            ("invoice to", 1.0),
            ("invoice address", 1.0),
            ("customer", 0.6),
            ("bill to address", 1.0),
            ("sold to", 0.9),
        ],
        DE: [("rechnungsadresse", 1.0), ("rechnungsempfanger", 1.0), ("kunde", 0.6)],
        FR: [("facturer a", 1.0), ("adresse de facturation", 1.0), ("client", 0.6)],
        NL: [("factuuradres", 1.0), ("klant", 0.5)],
        ES: [("facturar a", 1.0), ("direccion de facturacion", 1.0), ("cliente", 0.6)],
        IT: [("fatturare a", 1.0), ("intestatario", 0.9), ("cliente", 0.6)],
    },
    "seller": {
        EN: [
            ("sold by", 1.0),
            ("seller", 1.0),
            ("supplier", 1.0),
            ("vendor", 1.0),
            ("service provider", 0.9),
            ("from", 0.5),
        ],
        DE: [("verkaufer", 1.0), ("lieferant", 1.0), ("rechnungssteller", 1.0)],
        FR: [("vendeur", 1.0), ("fournisseur", 1.0)],
        NL: [("verkoper", 1.0), ("leverancier", 1.0)],
        ES: [("vendedor", 1.0), ("proveedor", 1.0)],
        IT: [("venditore", 1.0), ("fornitore", 1.0), ("cedente", 1.0)],
    },
    "tax_id": {
        EN: [
            ("vat", 0.8),
            ("vat no", 1.0),
            ("vat number", 1.0),
            ("vat id", 1.0),
            ("vat reg no", 1.0),
            ("tax id", 1.0),
            ("gstin", 1.0),
            ("tin", 0.8),
            ("vat tin", 1.0),
            ("your vat number", 1.0),
        ],
        DE: [
            ("ust idnr", 1.0),
            ("ust id", 1.0),
            ("ust id nr", 1.0),
            ("steuernummer", 0.9),
            ("umsatzsteuer id", 1.0),
        ],
        FR: [
            ("tva intracommunautaire", 1.0),
            ("n tva", 1.0),
            ("numero de tva", 1.0),
            ("siret", 0.8),
        ],
        NL: [
            ("btw", 0.8),
            ("btw nummer", 1.0),
            ("btw nr", 1.0),
            ("btw id", 1.0),
            ("uw btw nummer", 1.0),
        ],
        ES: [("nif", 1.0), ("cif", 1.0), ("n iva", 1.0)],
        IT: [("partita iva", 1.0), ("p iva", 1.0), ("codice fiscale", 0.9)],
    },
}

# Words that make a tax id the buyer's ("your VAT number", "Uw BTW nummer").
BUYER_MARKERS = {
    "your",
    "customer",
    "uw",
    "klant",
    "ihre",
    "kunde",
    "votre",
    "client",
    "su",
    "cliente",
    "vostra",
    "buyer",
}

# Line-item columns, by header text.
_COLUMNS: dict[str, list[str]] = {
    "description": [
        "description",
        "item",
        "items",
        "article",
        "product",
        "title",
        "service",
        "details",
        "artikel",
        "omschrijving",
        "beschreibung",
        "bezeichnung",
        "leistung",
        "produkt",
        "designation",
        "libelle",
        "descripcion",
        "concepto",
        "producto",
        "descrizione",
        "articolo",
        "prodotto",
    ],
    "quantity": [
        "qty",
        "quantity",
        "units",
        "aantal",
        "hoeveelheid",
        "menge",
        "anzahl",
        "quantite",
        "qte",
        "cantidad",
        "cant",
        "quantita",
        "q ta",
        "qta",
    ],
    "unit_price": [
        "unit price",
        "price",
        "unit cost",
        "rate",
        "prijs",
        "prijs per stuk",
        "stukprijs",
        "einzelpreis",
        "preis",
        "e preis",
        "prix unitaire",
        "prix",
        "pu",
        "precio unitario",
        "precio",
        "prezzo unitario",
        "prezzo",
    ],
    "tax_rate": [
        "tax",
        "tax %",
        "tax rate",
        "vat",
        "vat %",
        "vat rate",
        "taxes",
        "btw",
        "btw %",
        "mwst",
        "ust",
        "tva",
        "iva",
        "gst",
    ],
    "tax_amount": ["tax amount", "vat amount", "btw bedrag", "mwst betrag", "montant tva"],
    "discount_percent": [
        "disc",
        "disc %",
        "discount",
        "korting",
        "rabatt",
        "remise",
        "descuento",
        "sconto",
    ],
    "amount": [
        "amount",
        "total",
        "line total",
        "net amount",
        "bedrag",
        "totaal",
        "prijs incl btw",
        "betrag",
        "gesamt",
        "gesamtpreis",
        "summe",
        "montant",
        "montant ht",
        "total ht",
        "importe",
        "importo",
        "totale",
    ],
}

ITEM_INCLUDED_MARKERS = (
    "incl ",
    "inkl ",
    "including ",
    "inclusief ",
    "dont ",
    "incluido ",
    "di cui ",
)

PAGE_COUNTER = re.compile(
    r"\b(?:page|seite|pagina|página|blad|pag)\.?\s*:?\s*(\d{1,3})\s*"
    r"(?:/|of|von|sur|de|di|van|\|)\s*(\d{1,3})\b",
    re.IGNORECASE,
)


def header_labels() -> list[Label]:
    labels = [
        Label(field, normalise_label(text), language, weight)
        for field, by_language in _HEADER.items()
        for language, entries in by_language.items()
        for text, weight in entries
    ]
    # Longest first: the first label that matches a line is its most specific.
    return sorted(labels, key=lambda label: len(label.text), reverse=True)


def column_labels() -> list[tuple[str, str]]:
    pairs = [
        (column, normalise_label(text)) for column, texts in _COLUMNS.items() for text in texts
    ]
    return sorted(pairs, key=lambda pair: len(pair[1]), reverse=True)


HEADER_LABELS = header_labels()
COLUMN_LABELS = column_labels()
