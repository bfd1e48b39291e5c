"""`pagemill submit DIR/`: every document in a folder as one batch (POST /v1/batches),
then a progress bar of its jobs until every one has ended."""

from __future__ import annotations

import time
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import httpx
from rich.console import Console
from rich.table import Table

from cli.progress import progress_bar

# What the API takes (it sniffs the bytes; the suffix only picks files out of a folder).
DOCUMENT_SUFFIXES = frozenset({".pdf", ".png", ".jpg", ".jpeg", ".tif", ".tiff", ".webp"})
POLL_S = 1.0


class BatchFailed(Exception):
    """The batch was refused, or ended with jobs that did not succeed."""


def documents_in(folder: Path) -> list[Path]:
    """The folder's documents (not its subfolders'), by name."""
    return sorted(
        path
        for path in folder.iterdir()
        if path.is_file() and path.suffix.lower() in DOCUMENT_SUFFIXES
    )


def submit_folder(
    client: httpx.Client, folder: Path, data: dict[str, str], console: Console
) -> dict[str, Any]:
    """Send the folder's documents as one batch; returns the batch as the API gave it."""
    paths = documents_in(folder)
    if not paths:
        raise BatchFailed(f"{folder} holds no PDF or image to submit.")
    with ExitStack() as stack:
        files = [("file", (path.name, stack.enter_context(path.open("rb")))) for path in paths]
        with console.status(f"Sending {len(paths)} documents"):
            # Every upload is checked before the answer: allow for a large folder.
            response = client.post("/v1/batches", files=files, data=data, timeout=600)
    body: dict[str, Any] = response.json()
    if response.is_error:
        _print_refusal(body.get("error", {}), response.status_code, console)
        raise BatchFailed(body.get("error", {}).get("message", "The batch was refused."))
    return body


def wait_for_batch(client: httpx.Client, batch: dict[str, Any], console: Console) -> dict[str, Any]:
    """Poll until every job has ended, showing how many have."""
    with progress_bar(console) as progress:
        task = progress.add_task(f"batch {batch['id']}", total=batch["documents"])
        while True:
            response = client.get(f"/v1/batches/{batch['id']}")
            response.raise_for_status()
            batch = response.json()
            progress.update(task, completed=batch["jobs"]["ended"])
            if batch["status"] == "completed":
                return batch
            time.sleep(POLL_S)


def print_summary(batch: dict[str, Any], console: Console) -> None:
    counts = ", ".join(f"{n} {status}" for status, n in sorted(batch["jobs"]["by_status"].items()))
    console.print(f"batch {batch['id']} {batch['status']}: {counts}; cost ${batch['cost_usd']}")


def _print_refusal(error: dict[str, Any], status: int, console: Console) -> None:
    console.print(f"[red]{status} {error.get('code')}: {error.get('message')}[/red]")
    items = error.get("items") or []
    if not items:
        return
    table = Table("document", "code", "why")
    for item in items:
        table.add_row(str(item.get("name") or item["index"]), item["code"], item["message"])
    console.print(table)
