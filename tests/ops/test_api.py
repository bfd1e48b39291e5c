"""GET /v1/ops/{name}: every view as JSON, to admin keys only."""

from __future__ import annotations

from pagemill.db.session import session_scope
from pagemill.ops.catalog import VIEWS
from pagemill.ops.repository import read_rows
from tests.conftest import make_client_key
from tests.ops.conftest import OpsWorld, api_client, steady


def test_admin_keys_read_every_view_others_are_refused(
    ops_world: OpsWorld, ops_api_url: str
) -> None:
    admin_key = make_client_key("ops-admin", admin=True)
    plain_key = make_client_key("ops-plain")

    with api_client(ops_api_url, None) as anonymous:
        response = anonymous.get("/v1/ops/stuck-jobs")
        assert response.status_code == 401
        assert response.json()["error"]["code"] == "missing_api_key"
    with api_client(ops_api_url, "pm_nope_nope") as forged:
        response = forged.get("/v1/ops/stuck-jobs")
        assert response.status_code == 401
        assert response.json()["error"]["code"] == "invalid_api_key"

    with api_client(ops_api_url, plain_key) as plain:
        # Unknown names too: a client learns nothing about what exists.
        for name in [*VIEWS, "webhook-deliveries", "no-such-view"]:
            response = plain.get(f"/v1/ops/{name}")
            assert response.status_code == 403, (name, response.text)
            assert response.json()["error"]["code"] == "admin_only"

    with api_client(ops_api_url, admin_key) as admin:
        for name, spec in VIEWS.items():
            response = admin.get(f"/v1/ops/{name}")
            assert response.status_code == 200, (name, response.text)
            body = response.json()
            with session_scope() as session:
                expected = read_rows(session, name)
            assert (body["view"], body["title"], body["limit"], body["offset"]) == (
                name,
                spec.title,
                500,
                0,
            )
            assert body["rows"] and all(list(row) == body["columns"] for row in body["rows"])
            assert steady(body["rows"]) == steady(expected), name

        licence = admin.get("/v1/ops/licence-audit").json()["rows"]
        bases = [(row["license_use"], row["basis_permits_commercial"]) for row in licence]
        assert bases == [("commercial", True), ("non_commercial", False), ("non_commercial", True)]
        assert [row["pages"] for row in licence] == [2, 2, 3]
        costs = admin.get("/v1/ops/cost-by-client-day").json()["rows"]
        assert [row["cost_usd"] for row in costs] == ["0.0006", "0.00045", "0.0002"]

        paged = admin.get("/v1/ops/jobs-by-client", params={"limit": 2, "offset": 3}).json()
        assert [(row["client"], row["status"]) for row in paged["rows"]] == [
            ("globex", "succeeded"),
            ("globex", "failed"),
        ]
        assert admin.get("/v1/ops/jobs-by-client", params={"limit": 0}).status_code == 422

        unknown = admin.get("/v1/ops/no-such-view")
        assert unknown.status_code == 404
        assert unknown.json()["error"]["code"] == "unknown_view"
        assert "stuck-jobs" in unknown.json()["error"]["message"]

        # The webhook ops view keeps its own route, with the same admin check.
        deliveries = admin.get("/v1/ops/webhook-deliveries")
        assert deliveries.status_code == 200, deliveries.text
        assert deliveries.json()["deliveries"] == []
