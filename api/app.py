"""The ingest API: a thin layer over pagemill's job service."""

from __future__ import annotations

from fastapi import FastAPI

from api.errors import install_error_handlers
from api.routes import jobs


def create_app() -> FastAPI:
    app = FastAPI(
        title="pagemill",
        version="0.1.0",
        description="Documents in, Markdown out: submit a PDF or a page image, get Markdown back.",
    )
    install_error_handlers(app)
    app.include_router(jobs.router)

    @app.get("/healthz", tags=["ops"])
    def healthz() -> dict[str, str]:
        return {"status": "ok"}

    return app


app = create_app()
