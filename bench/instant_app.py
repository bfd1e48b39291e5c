"""The production worker with an instant engine, for the orchestration benchmark.

`celery -A bench.instant_app worker ...`: the real Celery app, tasks, stages,
database, S3 and finalize, with the engine registered as "rapidocr" replaced by
one that returns a fixed page at once. Jobs reach it with `engine=rapidocr`.
Production code never imports this module (it lives outside the installed
packages), so the instant engine cannot be selected there.

With PAGEMILL_BENCH_ROUNDTRIPS_KEY set, each task's Postgres round trips and CPU
are counted by stage (bench/roundtrips.py).
"""

from __future__ import annotations

from functools import cache, lru_cache
from typing import Any

from celery.signals import task_postrun, task_prerun

from bench import roundtrips
from worker.celery_app import app
from worker.engines import registry
from worker.engines.base import EngineResult, PageInput


class InstantEngine:
    name = "rapidocr"
    render_dpi = 150

    def convert(self, page: PageInput) -> EngineResult:
        return EngineResult(
            markdown=invoice_page(page.facts.number),
            device_seconds=0.0,
            device_kind="cpu",
            finish_reason="stop",
        )


@cache
def invoice_page(number: int) -> str:
    """A page of Markdown as long as jina-ocr-v1's average output (about 1,085 tokens,
    some 3,700 characters): an invoice's heading, addresses, a table of 36 lines and its
    totals. What the service does with a page's Markdown (its checks, its row, its
    object, the assembled document) costs with its length: a short fixed line would
    leave that out of the benchmark. Made once a page number, so that the engine's own
    share of the CPU measured is nil (it took 47 us a page)."""
    lines = [
        f"# Invoice 2041-{number:04d}",
        "",
        "**Harbour Supplies Ltd** · 14 Quay Street · Bristol BS1 4DJ · VAT GB 284 1920 77",
        "",
        f"**Bill to:** Northfield Bakery, 3 Mill Lane, Leeds LS2 7QT · Order PO-{number * 37:06d}",
        "",
        "| # | Description | Quantity | Unit price | Amount |",
        "|---|---|---|---|---|",
    ]
    total = 0.0
    for line in range(1, 37):
        quantity = (number + line) % 9 + 1
        price = ((number * 7 + line * 13) % 97) + 0.5
        total += quantity * price
        lines.append(
            f"| {line} | Item {number * 7 + line}: flour, sugar and packaging, batch "
            f"{number:03d}-{line:02d} | {quantity} | {price:.2f} EUR | {quantity * price:.2f} EUR |"
        )
    lines += [
        "",
        f"**Subtotal:** {total:.2f} EUR · **VAT 20 %:** {total * 0.2:.2f} EUR · "
        f"**Total due:** {total * 1.2:.2f} EUR",
        "",
        "Payment within 30 days to IBAN GB29 NWBK 6016 1331 9268 19, quoting the invoice "
        "number. Goods remain our property until paid in full. Questions about this invoice: "
        "accounts@harbour-supplies.example, +44 117 496 0123.",
    ]
    return "\n".join(lines) + "\n"


# Set in the parent before the pool forks, so every child inherits it.
registry._engines["rapidocr"] = InstantEngine()

_clocks: dict[str, roundtrips.StageClock] = {}


@lru_cache(maxsize=1)
def _redis() -> Any:
    import redis

    from pagemill.settings import get_settings

    return redis.Redis.from_url(get_settings().broker_url)


def _on_task_start(task_id: str | None = None, task: Any = None, **_: Any) -> None:
    if task_id is not None and task is not None:
        _clocks[task_id] = roundtrips.StageClock(task.name.rsplit(".", 1)[-1])


def _on_task_end(task_id: str | None = None, **_: Any) -> None:
    clock = _clocks.pop(task_id or "", None)
    if clock is not None:
        clock.stop()
        roundtrips.flush_soon(_redis())


if roundtrips.key() is not None:
    from pagemill.db.session import get_engine

    roundtrips.install(get_engine())
    task_prerun.connect(_on_task_start, weak=False)
    task_postrun.connect(_on_task_end, weak=False)

__all__ = ["app"]
