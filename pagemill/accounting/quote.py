"""The quote: what a job is expected to cost, given at submit.

Each selected page is priced by the engine it will most likely be routed to, by the
rule prepare routes it by (pagemill.routing) applied to what inspection measured of
the page. A page costs an engine about in line with how much it holds, so the quote
fits cost against the page's measures over the engine's recent pages
(pagemill.accounting.cost_model) and prices the page by that fit:

- the text layer engine by the square root of the page's words, the share of its rows
  that hold lines side by side (pagemill.documents.facts.TextLines) and the vector paths
  it draws (pagemill.documents.facts.drawn_paths): its layout analysis places every
  word, and a page of 500 words cost half as much again as one of 60, not eight times as
  much; each table it finds is read again for its grid, and tables are where lines stand
  side by side; it goes through every path drawn (a handbook page of 355 paths and 166
  small images cost as much as an invoice of three tables). Fitted on all but one of the
  13 born-digital documents of the benchmark corpus (36 pages, each cost the CPU seconds
  of worker.engines.textlayer reading it alone on one layout thread, the fastest of 5
  runs) and tried on that one, the root of the lines with the share left the worst
  document 33 % off (that handbook page) and the median 6.0 %; the words, share and
  paths 21 % (an invoice the layout analysis finds three tables on, -21 %; the handbook
  -12 %) and 6.3 %. Line segments among the drawings (rulings, a grid of them),
  rectangles and rows of three or more lines side by side did not foretell the tables it
  finds: none lowered the worst document by more than half a point, and rulings fitted a
  falling slope. Taking each page's median of the 5 runs rather than its fastest, the
  invoice is the worst either way, 36 % and 35 % off (its runs spread from 438 to 586
  ms), the handbook 31 % and 10 %. Pages recorded before words and paths were kept, and
  pages whose paths were not listed, are priced by their lines and share as before;
- an OCR engine by the square root of the page's ink blobs (pagemill.documents.facts.
  ink_blobs: the separate marks it detects and recognises) and the square root of the
  megapixels of the image it reads (decoding, detection and turning the page upright
  run over every pixel, but the recogniser reads each line scaled to one height: the
  same invoice page drawn at 0.5, 1.0, 2.2, 3.9 and 8.7 megapixels cost rapidocr 3.7,
  3.9, 4.9, 5.6 and 6.3 s of CPU, a one-sentence scan 0.9, 1.1, 1.7, 2.1 and 2.3 s,
  where a slope in the megapixels themselves overprices a large photo of a short
  page). Fitted on all but one of 26 pages rapidocr read (2 scans, 24 born-digital
  pages rendered as it reads them) and tried on that one, the root of the blobs left the
  worst page 18 % off, the page's ink (its mean darkness) 282 %: a sentence in a heavy
  font is as dark as a page of small print. Pages recorded before blobs were counted,
  and pages inspection did not count, are priced by their ink and megapixels as before.

A model whose terms cannot be trusted (too few pages, terms that do not vary apart, a
slope at or below zero) gives way to one with fewer terms, then to the engine's recent
mean cost; so does a page not measured, or one the model would price at or below zero.
A PDF page inspection did not measure is priced like the document's measured pages
(`quote_usd`); with none measured, as OCR would read it: the dearer guess. A page that
draws nothing is free: it is found blank before any OCR engine runs
(worker.stages.quality).

The quote reads at most QUOTE_WINDOW_PAGES rows per engine it prices, and keeps what
they say (`EngineCosts`) in the process for `quote_model_ttl_s` seconds
(pagemill.accounting.ttl_cache), so a busy API reads and fits them once in that time
rather than at every submit.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from decimal import Decimal

from sqlalchemy.orm import Session

from pagemill.accounting import repository
from pagemill.accounting.cost_model import CostModels, Measures
from pagemill.accounting.pricing import SECONDS_PER_HOUR, USD_PRECISION, price_usd_per_hour
from pagemill.accounting.ttl_cache import TtlCache
from pagemill.documents.facts import (
    BLOBS_FACT,
    DRAWN_PATHS_FACT,
    INK_FACT,
    SIDE_BY_SIDE_FACT,
    TEXT_LINES_FACT,
    WORDS_FACT,
    TextLayerFacts,
)
from pagemill.documents.inspect import DocumentInfo
from pagemill.domain import SourceKind
from pagemill.engines.catalog import engine_spec
from pagemill.routing import TEXT_LAYER_ENGINE, route_page
from pagemill.settings import Settings

# Pages whose recent cost makes up the quote: enough to smooth noise, recent
# enough to follow a price change.
QUOTE_WINDOW_PAGES = 500
# The terms each kind of engine is priced by, in the order they are given up.
TEXT_LAYER_TERMS = ("sqrt_words", "side_by_side_share", "paths")
# A text layer page's models, best first: by its words, side-by-side share and paths;
# failing them (a page or a history from before words and paths were kept), by its lines
# and share as before, then by either alone.
TEXT_LAYER_TERM_SETS = (
    TEXT_LAYER_TERMS,
    ("sqrt_text_lines", "side_by_side_share"),
    ("sqrt_text_lines",),
    ("side_by_side_share",),
)
OCR_TERMS = ("sqrt_ink_blobs", "ink", "sqrt_megapixels")
# An OCR page's models, best first: by its blobs; failing them (a page or a history
# without blobs), by its ink; by its size alone last. Blobs and ink are not fitted
# together: they measure the same text, and the ink would only add its noise.
OCR_TERM_SETS = (
    ("sqrt_ink_blobs", "sqrt_megapixels"),
    ("sqrt_ink_blobs",),
    ("ink", "sqrt_megapixels"),
    ("ink",),
    ("sqrt_megapixels",),
)
# What a page inspection did not measure is taken to have: no text layer, which
# `auto` routes to OCR.
UNMEASURED = TextLayerFacts(
    text_chars=0, unreadable_chars=0, invisible_text_chars=0, image_coverage=0.0
)


def mean_page_cost_usd(session: Session, settings: Settings, engine: str) -> Decimal:
    """The recent mean cost of a page the engine read; with no history yet, the
    configured fallback device seconds at this price."""
    mean = repository.mean_cost_per_page(session, engine, QUOTE_WINDOW_PAGES)
    if mean is not None:
        return mean
    seconds = Decimal(str(settings.quote_fallback_seconds_per_page))
    return seconds * price_usd_per_hour(settings) / SECONDS_PER_HOUR


def text_layer_measures(
    text_lines: int | None,
    side_by_side_share: float | None,
    words: int | None = None,
    paths: int | None = None,
) -> Measures:
    measures = {}
    if text_lines is not None:
        measures["sqrt_text_lines"] = math.sqrt(text_lines)
    if side_by_side_share is not None:
        measures["side_by_side_share"] = float(side_by_side_share)
    if words is not None:
        measures["sqrt_words"] = math.sqrt(words)
    if paths is not None:
        measures["paths"] = float(paths)
    return measures


def ocr_measures(ink: float | None, pixels: float | None, blobs: int | None = None) -> Measures:
    measures = {}
    if blobs is not None:
        measures["sqrt_ink_blobs"] = math.sqrt(blobs)
    if ink is not None:
        measures["ink"] = float(ink)
    if pixels is not None:
        measures["sqrt_megapixels"] = math.sqrt(pixels / 1e6)
    return measures


def history_measures(engine: str, page: repository.PricedPage) -> Measures:
    """What was measured of a priced page, as the quote measures it for its engine."""
    if engine == TEXT_LAYER_ENGINE:
        lines, words, paths = (
            page.facts.get(key) for key in (TEXT_LINES_FACT, WORDS_FACT, DRAWN_PATHS_FACT)
        )
        return text_layer_measures(
            None if lines is None else int(lines),
            page.facts.get(SIDE_BY_SIDE_FACT),
            None if words is None else int(words),
            None if paths is None else int(paths),
        )
    blobs = page.facts.get(BLOBS_FACT)
    return ocr_measures(
        page.facts.get(INK_FACT), page.image_pixels, None if blobs is None else int(blobs)
    )


def pixels_read(info: DocumentInfo, number: int, engine: str, settings: Settings) -> float | None:
    """The pixels of the image the OCR engine will read of the page, as prepare renders
    it: a PDF page at the engine's resolution, an image as it is, either shrunk to the
    render budget. None when the page's size or the engine's resolution is not known
    here (a GPU engine's resolution is its deployment's)."""
    size = info.size_of(number)
    if size is None:
        return None
    width, height = size
    if info.kind is SourceKind.pdf:
        dpi = engine_spec(engine).render_dpi
        if not isinstance(dpi, int):
            return None
        width, height = width / 72 * dpi, height / 72 * dpi
    return min(width * height, float(settings.max_render_pixels))


@dataclass(frozen=True)
class EngineCosts:
    """What an engine's recent pages say a page costs: their mean, and the models of
    cost against measures they support."""

    mean_usd: Decimal
    models: CostModels

    @classmethod
    def recent(cls, session: Session, settings: Settings, engine: str) -> EngineCosts:
        points = [
            (history_measures(engine, page), float(page.cost_usd))
            for page in repository.recent_page_costs(session, engine, QUOTE_WINDOW_PAGES)
        ]
        if engine == TEXT_LAYER_ENGINE:
            models = CostModels(TEXT_LAYER_TERMS, points, TEXT_LAYER_TERM_SETS)
        else:
            models = CostModels(OCR_TERMS, points, OCR_TERM_SETS)
        return cls(mean_page_cost_usd(session, settings, engine), models)

    def of_page(self, measures: Measures) -> Decimal:
        """The page's cost from the best model its measures allow; the mean where there
        is none, or where the model would price the page at or below zero."""
        model = self.models.for_page(measures)
        if model is None:
            return self.mean_usd
        predicted = model.at(measures)
        if predicted <= 0:
            return self.mean_usd
        return Decimal(repr(predicted))


# Each engine's recent costs, by what they were read under: the database they come from
# and the price and fallback that make the mean where there is no history.
RECENT_COSTS: TtlCache[EngineCosts] = TtlCache()


def recent_costs(session: Session, settings: Settings, engine: str) -> EngineCosts:
    """The engine's `EngineCosts`, as read at most `quote_model_ttl_s` seconds ago."""
    key = (
        settings.database_url,
        engine,
        settings.device_price_usd_per_hour,
        settings.quote_fallback_seconds_per_page,
    )
    return RECENT_COSTS.get(
        key,
        settings.quote_model_ttl_s,
        lambda: EngineCosts.recent(session, settings, engine),
    )


def quote_usd(
    session: Session,
    settings: Settings,
    info: DocumentInfo,
    numbers: Sequence[int],
    requested: str,
    ocr_engine: str,
) -> Decimal:
    """The selected pages, each at what its likely engine's recent pages say a page
    holding as much costs (`EngineCosts`).

    A page inspection did not measure (a long document is measured at a sample of its
    pages; past its time budget, or too heavy to trace) is priced at the mean of the
    measured pages selected, or of the document's measured pages when none of them is:
    a document's pages are mostly alike. With no page measured, it is priced as OCR
    would read it."""
    costs: dict[str, EngineCosts] = {}
    measured_prices: list[Decimal] = []
    unmeasured: list[int] = []
    for number in numbers:
        if info.facts_of(number) is None and info.kind is SourceKind.pdf:
            unmeasured.append(number)
        else:
            measured_prices.append(
                _page_price(session, settings, info, number, requested, ocr_engine, costs)
            )
    if unmeasured and not measured_prices:
        measured_prices = [
            _page_price(session, settings, info, number, requested, ocr_engine, costs)
            for number in range(1, info.page_count + 1)
            if info.facts_of(number) is not None
        ]
        if measured_prices:
            mean = sum(measured_prices, Decimal(0)) / len(measured_prices)
            return (mean * len(unmeasured)).quantize(USD_PRECISION)
    total = sum(measured_prices, Decimal(0))
    if unmeasured and measured_prices:
        total += len(unmeasured) * total / len(measured_prices)
    else:
        for number in unmeasured:
            total += _page_price(session, settings, info, number, requested, ocr_engine, costs)
    return total.quantize(USD_PRECISION)


def _page_price(
    session: Session,
    settings: Settings,
    info: DocumentInfo,
    number: int,
    requested: str,
    ocr_engine: str,
    costs: dict[str, EngineCosts],
) -> Decimal:
    measured = info.facts_of(number)
    facts = measured or UNMEASURED
    engine = route_page(requested, facts, info.kind is SourceKind.pdf, ocr_engine).engine
    if facts.draws_nothing and engine != TEXT_LAYER_ENGINE:
        return Decimal(0)  # found blank before OCR: free
    if engine not in costs:
        costs[engine] = recent_costs(session, settings, engine)
    if engine == TEXT_LAYER_ENGINE:
        measures = text_layer_measures(
            facts.text_lines, facts.side_by_side_share, facts.words, facts.drawn_paths
        )
    else:
        pixels = pixels_read(info, number, engine, settings)
        measures = ocr_measures(info.ink_of(number), pixels, info.blobs_of(number))
    return costs[engine].of_page(measures)
