"""/v1/jobs/{id}/invoice: the invoice data of a job submitted with extract=invoice."""

from __future__ import annotations

from fastapi import APIRouter, Response

from api.deps import SessionDep, StoreDep
from api.errors import ApiError
from api.results import ResultJobDep, read_stored
from pagemill.domain import TERMINAL_JOB_STATUSES
from pagemill.invoices.schemas import InvoiceDocument
from pagemill.storage import JobKeys

router = APIRouter(prefix="/v1/jobs", tags=["jobs"])


@router.get(
    "/{job_id}/invoice",
    response_class=Response,
    responses={
        200: {
            "model": InvoiceDocument,
            "description": "Each invoice in the file with its page range, fields, line items "
            "and checks; every value as printed and normalised, with its page, box (points "
            "from the page's top-left corner) and confidence.",
        },
        404: {"description": "No such job, or it was not submitted with extract=invoice."},
        409: {"description": "The job has not finished, or its invoice data was not stored."},
        410: {"description": "The job's results were purged."},
    },
)
def get_invoice(job: ResultJobDep, session: SessionDep, store: StoreDep) -> Response:
    if job.extract != "invoice":
        raise ApiError(
            404,
            "invoice_not_requested",
            "This job was not submitted with extract=invoice; submit the document again "
            "with that option to get its invoice data.",
        )
    if job.status not in TERMINAL_JOB_STATUSES:
        raise ApiError(
            409,
            "invoice_not_ready",
            f"The invoice data is written when the job ends; the job is {job.status.value}.",
        )
    invoice = read_stored(session, store, job, JobKeys(job.id).invoice)
    if invoice is None:
        raise ApiError(
            409,
            "invoice_not_available",
            f"The job ended ({job.status.value}) without invoice data: "
            "it was cancelled or failed before its pages were assembled, "
            "or the extraction failed.",
        )
    return Response(invoice, media_type="application/json")
