"""The `pagemill` command."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path
from typing import Annotated

import httpx
import typer
from rich.console import Console
from rich.progress import (
    Progress,
    TaskID,
)
from rich.table import Table

from cli.progress import progress_bar
from pagemill.domain import JobStatus
from pagemill.engines.catalog import LOCAL_ENGINE_CHOICES, describe_choices
from pagemill.ops.catalog import VIEWS as OPS_VIEWS

# No GPU and no workers here: the engines that run in this process.
LOCAL_ENGINES = describe_choices(LOCAL_ENGINE_CHOICES)

app = typer.Typer(help="pagemill: documents in, Markdown out.", no_args_is_help=True)
client_app = typer.Typer(help="Manage API clients.", no_args_is_help=True)
app.add_typer(client_app, name="client")
ops_app = typer.Typer(
    help="Ops tables, read from the database directly (run next to the deployment).",
    no_args_is_help=True,
)
app.add_typer(ops_app, name="ops")
console = Console()


@app.command()
def convert(
    files: Annotated[list[Path], typer.Argument(exists=True, dir_okay=False, readable=True)],
    out: Annotated[Path, typer.Option("-o", "--out", help="Output folder.")] = Path("out"),
    pages: Annotated[str | None, typer.Option(help='Pages to convert, e.g. "1-3,7".')] = None,
    engine: Annotated[str, typer.Option(help=f"{LOCAL_ENGINES}.")] = "auto",
    furniture: Annotated[
        str,
        typer.Option(
            help="Running headers, footers and page numbers: separate (out of document.md, "
            "listed in manifest.json), inline or drop."
        ),
    ] = "separate",
    extract: Annotated[
        str | None,
        typer.Option(
            help="invoice: also read the invoice's fields, line items and checks into invoice.json."
        ),
    ] = None,
) -> None:
    """Convert documents here, in this process, with no servers."""
    _engines_on_every_core()
    from cli.convert import convert_file
    from pagemill.documents.inspect import DocumentRejected
    from pagemill.documents.pagerange import PageRangeError
    from pagemill.quality.furniture import FurnitureMode

    if engine not in LOCAL_ENGINE_CHOICES:
        raise typer.BadParameter(f"engine must be {LOCAL_ENGINES}", param_hint="--engine")
    if furniture not in FurnitureMode.__members__:
        raise typer.BadParameter(
            "furniture must be separate, inline or drop", param_hint="--furniture"
        )
    if extract not in (None, "invoice"):
        raise typer.BadParameter("extract must be invoice", param_hint="--extract")
    failures = 0
    for source in files:
        with _progress() as progress:
            task = progress.add_task(source.name, total=None)

            def set_total(count: int, task: TaskID = task, progress: Progress = progress) -> None:
                progress.update(task, total=count)

            def advance(_page: object, task: TaskID = task, progress: Progress = progress) -> None:
                progress.advance(task)

            try:
                result = convert_file(
                    source,
                    out,
                    pages=pages,
                    engine=engine,
                    furniture=FurnitureMode(furniture),
                    on_page_count=set_total,
                    on_page=advance,
                    extract=extract,
                )
            except (DocumentRejected, PageRangeError) as error:
                failures += 1
                console.print(f"[red]{source}: {error}[/red]")
                continue
        table = Table(title=f"{source.name} -> {result.directory / 'document.md'}")
        for column in ("page", "engine", "why", "seconds", "characters"):
            table.add_column(column, justify="right" if column != "why" else "left")
        for page in result.pages:
            table.add_row(
                str(page.number),
                page.engine,
                page.engine_reason,
                f"{page.wall_seconds:.2f}",
                str(page.output_chars),
            )
        console.print(table)
    if failures:
        raise typer.Exit(1)


def _engines_on_every_core() -> None:
    """This process reads one page at a time, where a worker runs a pool child a core:
    unless set otherwise, its CPU OCR calls run on every core."""
    os.environ.setdefault("PAGEMILL_CPU_ENGINE_THREADS", str(os.cpu_count() or 1))


def _progress() -> Progress:
    return progress_bar(console)


@app.command("eval")
def evaluate(
    folder: Annotated[Path, typer.Argument(exists=True, file_okay=False, readable=True)],
    out: Annotated[Path, typer.Option("-o", "--out", help="Results as JSON.")] = Path(
        "eval-results.json"
    ),
    engine: Annotated[str, typer.Option(help=f"{LOCAL_ENGINES}.")] = "auto",
    variants: Annotated[
        bool, typer.Option(help="Also score scans made from the folder's born-digital PDFs.")
    ] = False,
    variant_pages: Annotated[int, typer.Option(min=1, help="First pages per variant.")] = 2,
    variant_kinds: Annotated[
        str | None, typer.Option(help="Comma-separated, e.g. noise,blur (default: all).")
    ] = None,
    seed: Annotated[int, typer.Option(help="Seed of the scanned variants.")] = 0,
    thresholds: Annotated[
        Path | None,
        typer.Option(exists=True, dir_okay=False, help="JSON of aggregates to meet, or exit 1."),
    ] = None,
    work_dir: Annotated[
        Path | None, typer.Option(help="Keep variants and Markdown here (default: discarded).")
    ] = None,
) -> None:
    """Score the pipeline's output against ground truth in a folder, with no servers."""
    _engines_on_every_core()
    from cli.evaluate import evaluate_command

    evaluate_command(
        folder, out, engine, variants, variant_pages, variant_kinds, seed, thresholds, work_dir
    )


@app.command("eval-variants")
def eval_variants(
    source: Annotated[Path, typer.Argument(exists=True, file_okay=False, readable=True)],
    out: Annotated[Path, typer.Argument(file_okay=False)],
    pages: Annotated[int, typer.Option(min=1, help="First pages of each PDF.")] = 2,
    seed: Annotated[int, typer.Option()] = 0,
    kinds: Annotated[str | None, typer.Option(help="Comma-separated, e.g. noise,blur.")] = None,
) -> None:
    """Make scanned variants of born-digital PDFs, with their text layer as reference."""
    from cli.evaluate import variants_command

    variants_command(source, out, pages, seed, kinds)


@app.command()
def api(
    host: Annotated[str | None, typer.Option()] = None,
    port: Annotated[int | None, typer.Option()] = None,
) -> None:
    """Serve the HTTP API."""
    import uvicorn

    from pagemill.settings import get_settings

    settings = get_settings()
    uvicorn.run(
        "api.app:app",
        host=host or settings.api_host,
        port=port or settings.api_port,
        log_level="info",
    )


@app.command()
def worker(
    queues: Annotated[
        str, typer.Option(help="Comma-separated stages and queues.")
    ] = "prepare,ocr,finalize,webhooks",
    concurrency: Annotated[int, typer.Option(help="Processes (or threads) to run.")] = 2,
    pool: Annotated[str, typer.Option(help="prefork, threads or solo.")] = "prefork",
) -> None:
    """Consume work from the queues."""
    from pagemill.settings import get_settings

    settings = get_settings()
    queue_names = ",".join(settings.queue(stage.strip()) for stage in queues.split(","))
    argv = [
        "celery",
        "-A",
        "worker.celery_app",
        "worker",
        "--loglevel=INFO",
        f"--queues={queue_names}",
        f"--concurrency={concurrency}",
        f"--pool={pool}",
        "--without-gossip",
        "--without-mingle",
    ]
    # Replace this process, so signals from a supervisor reach Celery directly.
    os.execvp(sys.executable, [sys.executable, "-m", *argv])  # noqa: S606


@app.command("engine-bench")
def engine_bench(
    inputs: Annotated[list[Path], typer.Argument(exists=True, help="Page images or folders.")],
    pages: Annotated[int, typer.Option(help="Pages to run (inputs are cycled).")] = 64,
    concurrency: Annotated[int, typer.Option(help="Pages in flight.")] = 32,
    speculation: Annotated[str, typer.Option(help="both, on or off.")] = "both",
    profile: Annotated[str | None, typer.Option(help="Model profile, e.g. jina-ocr-v1.")] = None,
    weights_dir: Annotated[Path | None, typer.Option(help="Local weights folder.")] = None,
    max_num_seqs: Annotated[int | None, typer.Option(help="Engine batch size.")] = None,
) -> None:
    """Run the vLLM engine alone on page images: pages/s, tokens, acceptance, GPU s/page."""
    if speculation not in ("both", "on", "off"):
        raise typer.BadParameter("use both, on or off", param_hint="--speculation")
    from worker.engines.vllm.bench import engine_bench_command

    engine_bench_command(
        inputs,
        pages=pages,
        concurrency=concurrency,
        speculation=speculation,  # type: ignore[arg-type]
        profile=profile,
        weights_dir=weights_dir,
        max_num_seqs=max_num_seqs,
        echo=typer.echo,
    )


@app.command()
def migrate(revision: Annotated[str, typer.Argument()] = "head") -> None:
    """Bring the database schema up to date."""
    from alembic import command
    from alembic.config import Config

    command.upgrade(Config(str(_project_root() / "alembic.ini")), revision)


def _project_root() -> Path:
    return Path(__file__).resolve().parents[1]


@client_app.command("create")
def client_create(
    name: str,
    admin: Annotated[bool, typer.Option(help="An operator key, for ops endpoints.")] = False,
) -> None:
    """Create a client and print its API key (shown once, never stored)."""
    from pagemill.clients.repository import ClientExists, create_client
    from pagemill.db.session import session_scope

    try:
        with session_scope() as session:
            client, key = create_client(session, name, is_admin=admin)
            client_id, webhook_secret = client.id, client.webhook_secret
    except ClientExists:
        console.print(f"[red]A client named {name!r} already exists.[/red]")
        raise typer.Exit(1) from None
    console.print(f"client {name} ({client_id})")
    console.print(f"webhook signing secret: {webhook_secret}", soft_wrap=True)
    typer.echo(key)


@client_app.command("rotate-webhook-secret")
def client_rotate_webhook_secret(
    name: str,
    overlap_hours: Annotated[
        float | None,
        typer.Option(help="How long the previous secret keeps signing too (default: settings)."),
    ] = None,
) -> None:
    """Give a client a new webhook signing secret and print it."""
    from datetime import timedelta

    from pagemill.db.session import session_scope
    from pagemill.settings import get_settings
    from pagemill.webhooks import outbox, repository

    overlap_s = (
        get_settings().webhook_secret_overlap_s if overlap_hours is None else overlap_hours * 3600
    )
    with session_scope() as session:
        client_id = repository.client_id_by_name(session, name)
        if client_id is None:
            console.print(f"[red]There is no client named {name!r}.[/red]")
            raise typer.Exit(1)
        secret, previous_expires_at = outbox.rotate_secret(
            session, client_id, timedelta(seconds=overlap_s)
        )
    if previous_expires_at is not None:
        console.print(f"the previous secret also signs until {previous_expires_at.isoformat()}")
    typer.echo(secret)


@app.command()
def submit(
    file: Annotated[
        Path, typer.Argument(exists=True, help="A document, or a folder of them (one batch).")
    ],
    wait: Annotated[
        bool | None,
        typer.Option(help="Wait for the job (or every job of a folder's batch) to end."),
    ] = None,
    pages: Annotated[str | None, typer.Option()] = None,
    engine: Annotated[str | None, typer.Option()] = None,
    out: Annotated[Path | None, typer.Option("-o", help="Write document.md here.")] = None,
    webhook_url: Annotated[
        str | None, typer.Option(help="A folder's batch.completed goes here.")
    ] = None,
) -> None:
    """Submit a document to a running API; a folder's documents go as one batch, with a
    progress bar until every job has ended (unless --no-wait)."""
    client = _api_client()
    data = {key: value for key, value in {"pages": pages, "engine": engine}.items() if value}
    if file.is_dir():
        _submit_folder(
            client,
            file,
            {**data, **({"webhook_url": webhook_url} if webhook_url else {})},
            wait is not False,
        )
        return
    with file.open("rb") as handle:
        response = client.post("/v1/jobs", files={"file": (file.name, handle)}, data=data)
    job = _json_or_exit(response)
    console.print(f"job {job['id']} {job['status']}")
    if not wait:
        return
    job = _wait_for(client, job["id"], job["pages"]["total"])
    console.print(f"job {job['id']} {job['status']} cost ${job['cost_usd']}")
    if job["status"] != "succeeded":
        raise typer.Exit(1)
    markdown = client.get(f"/v1/jobs/{job['id']}/markdown")
    if out is not None:
        out.write_text(markdown.text)
        console.print(f"Markdown written to {out}")
    else:
        typer.echo(markdown.text)


def _submit_folder(client: httpx.Client, folder: Path, data: dict[str, str], wait: bool) -> None:
    from cli import batch_submit

    try:
        batch = batch_submit.submit_folder(client, folder, data, console)
        console.print(f"batch {batch['id']}: {batch['documents']} documents")
        if not wait:
            return
        batch = batch_submit.wait_for_batch(client, batch, console)
    except batch_submit.BatchFailed as failed:
        console.print(f"[red]{failed}[/red]")
        raise typer.Exit(1) from None
    batch_submit.print_summary(batch, console)
    if set(batch["jobs"]["by_status"]) != {"succeeded"}:
        raise typer.Exit(1)


def _wait_for(client: httpx.Client, job_id: str, total: int) -> dict:
    with _progress() as progress:
        task = progress.add_task(job_id, total=total)
        while True:
            job = _json_or_exit(client.get(f"/v1/jobs/{job_id}"))
            progress.update(task, completed=job["pages"]["done"])
            if JobStatus(job["status"]).is_terminal:
                return job
            time.sleep(0.5)


@app.command()
def jobs(
    status: Annotated[str | None, typer.Option()] = None,
    limit: Annotated[int, typer.Option()] = 50,
) -> None:
    """List jobs from a running API."""
    params: dict[str, str | int] = {"limit": limit}
    if status:
        params["status"] = status
    body = _json_or_exit(_api_client().get("/v1/jobs", params=params))
    table = Table()
    for column in ("id", "status", "pages", "done", "cost_usd", "created"):
        table.add_column(column)
    for job in body["jobs"]:
        table.add_row(
            job["id"],
            job["status"],
            str(job["pages"]["total"]),
            str(job["pages"]["done"]),
            str(job["cost_usd"]),
            job["created_at"],
        )
    console.print(table)


def _api_client() -> httpx.Client:
    from pagemill.settings import get_settings

    settings = get_settings()
    if not settings.api_key:
        console.print("[red]Set PAGEMILL_API_KEY to a key from `pagemill client create`.[/red]")
        raise typer.Exit(2)
    return httpx.Client(
        base_url=settings.api_base_url,
        headers={"Authorization": f"Bearer {settings.api_key}"},
        timeout=60,
    )


def _json_or_exit(response: httpx.Response) -> dict:
    body = response.json()
    if response.is_error:
        error = body.get("error", {})
        console.print(
            f"[red]{response.status_code} {error.get('code')}: {error.get('message')}[/red]"
        )
        raise typer.Exit(1)
    return body


def _add_ops_command(name: str, title: str) -> None:
    def command(
        as_json: Annotated[bool, typer.Option("--json", help="Print JSON instead.")] = False,
        limit: Annotated[int, typer.Option(min=1, help="At most this many rows.")] = 500,
    ) -> None:
        _print_ops_view(name, as_json=as_json, limit=limit)

    ops_app.command(name, help=f"{title}.")(command)


for _ops_view in OPS_VIEWS.values():
    _add_ops_command(_ops_view.name, _ops_view.title)


def _print_ops_view(name: str, as_json: bool, limit: int) -> None:
    import json

    from sqlalchemy.exc import SQLAlchemyError

    from pagemill.db.session import session_scope
    from pagemill.ops.repository import read_view

    try:
        with session_scope() as session:
            found = read_view(session, name, limit=limit)
    except SQLAlchemyError as error:
        reason = str(getattr(error, "orig", None) or error).strip().splitlines()[0]
        console.print(f"[red]Could not read the database: {reason}[/red]")
        raise typer.Exit(1) from None
    if as_json:
        typer.echo(json.dumps(found.as_json(), indent=2))
        return
    table = Table(title=OPS_VIEWS[name].title)
    for column in found.columns:
        numeric = any(_is_number(row[column]) for row in found.rows)
        table.add_column(column, justify="right" if numeric else "left")
    for row in found.rows:
        table.add_row(*(_ops_cell(row[column]) for column in found.columns))
    if not found.rows:
        table.caption = "no rows"
    # Piped or captured output is not cut to a terminal's width.
    out = console
    if not console.is_terminal:
        from rich.measure import Measurement

        unbounded = Measurement.get(console, console.options.update_width(100_000), table)
        out = Console(width=max(console.width, unbounded.maximum))
    out.print(table)


def _is_number(value: object) -> bool:
    from decimal import Decimal

    return isinstance(value, int | float | Decimal) and not isinstance(value, bool)


def _ops_cell(value: object) -> str:
    from datetime import date, datetime
    from decimal import Decimal

    if value is None:
        return ""
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:.3f}"
    if isinstance(value, Decimal):
        if not value.is_finite():
            return str(value)
        # Money has 8 decimal places; averages would print 20.
        return format(value.quantize(Decimal("1e-8")).normalize(), "f")
    if isinstance(value, datetime):
        return value.isoformat(sep=" ", timespec="seconds")
    if isinstance(value, date):
        return value.isoformat()
    return str(value)


if __name__ == "__main__":
    app()
