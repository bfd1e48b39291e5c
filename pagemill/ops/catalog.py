"""The ops tables by their short names. Kept free of heavy imports: the CLI builds
one command per table from this at start-up."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class OpsView:
    name: str  # the short name: `pagemill ops NAME`, GET /v1/ops/NAME
    view: str  # the SQL view (migrations/versions/20261202_0004_governance.py)
    title: str


VIEWS: dict[str, OpsView] = {
    view.name: view
    for view in (
        OpsView("jobs-by-client", "ops_jobs_by_client_state", "Jobs by client and state"),
        OpsView(
            "stuck-jobs",
            "ops_stuck_jobs",
            "Queued and running jobs, oldest first; stuck: nothing moved for 10 minutes",
        ),
        OpsView(
            "cost-by-client-day",
            "ops_cost_by_client_day",
            "Cost of succeeded pages by client, by day",
        ),
        OpsView(
            "cost-per-page",
            "ops_cost_per_page_by_model_device",
            "Cost per succeeded page by model and device",
        ),
        OpsView(
            "licence-audit",
            "ops_licence_audit",
            "Succeeded pages by licence basis and licence use",
        ),
        OpsView(
            "worker-utilisation",
            "ops_worker_utilisation",
            "Workers: busy and idle device time, utilisation, all-in cost per page",
        ),
        OpsView(
            "page-usage",
            "ops_page_usage_by_client",
            "Pages by client today and this month (UTC), quota and retention overrides, "
            "jobs purged",
        ),
    )
}
