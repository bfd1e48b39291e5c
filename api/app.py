"""The ingest API: a thin layer over pagemill's job service."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import Depends, FastAPI

from api.console.routes import install_console
from api.deps import single_valued_query
from api.errors import install_error_handlers
from api.middleware import BodySizeLimit, HeadAsGet
from api.ratelimit import get_rate_limiter
from api.routes import batches, jobs, ops, usage, webhooks
from api.routes.blocks import router as blocks_router
from api.routes.invoices import router as invoices_router
from pagemill.documents.sandbox import start_fork_server
from pagemill.settings import get_settings


@asynccontextmanager
async def _lifespan(_: FastAPI) -> AsyncIterator[None]:
    # Uploads are inspected in sandboxed children forked from this server; starting
    # it here keeps its one-off start-up out of the first upload's response time.
    start_fork_server()
    yield


def create_app() -> FastAPI:
    app = FastAPI(
        title="pagemill",
        version="0.1.0",
        description="Documents in, Markdown out: submit a PDF or a page image, get Markdown back.",
        lifespan=_lifespan,
        # An address with a trailing slash is a 404 that says to send it without the
        # slash (api.errors), not a redirect: a redirect built from the request's Host and
        # scheme would send a client behind a TLS-terminating proxy to plain http, and
        # a client that does not follow a 307 with its body would drop its upload.
        redirect_slashes=False,
    )
    install_error_handlers(app)
    # Multipart framing adds a little to the file itself.
    settings = get_settings()
    app.add_middleware(
        BodySizeLimit,
        max_bytes=settings.max_upload_bytes + 64 * 1024,
        max_bytes_by_path={"/v1/batches": settings.batch_max_bytes},
    )
    app.add_middleware(HeadAsGet)
    get_rate_limiter()  # built before the first request, not by many requests at once
    # In this order: webhooks before ops, so that its /v1/ops/webhook-deliveries comes
    # before /v1/ops/{name}.
    for router in (
        jobs.router,
        batches.router,
        blocks_router,
        invoices_router,
        webhooks.router,
        usage.router,
        ops.router,
    ):
        app.include_router(router, dependencies=[Depends(single_valued_query)])
    install_console(app)

    @app.get("/healthz", tags=["ops"])
    def healthz() -> dict[str, str]:
        return {"status": "ok"}

    return app


app = create_app()
