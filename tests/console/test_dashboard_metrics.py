"""The provisioned Grafana dashboard queries only metrics that /metrics exports: every
metric name in its PromQL is checked against the running API's real exposition."""

from __future__ import annotations

import json
import re
from pathlib import Path

import httpx
import yaml
from prometheus_client.parser import text_string_to_metric_families

from tests.support.services import ROOT

DASHBOARD = ROOT / "deploy" / "grafana" / "dashboards" / "pagemill.json"

_STRINGS = re.compile(r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'')
_MATCHERS = re.compile(r"\{[^}]*\}")
_RANGES = re.compile(r"\[[^\]]*\]")
_GROUPINGS = re.compile(r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)")
_IDENTIFIER = re.compile(r"(?<![\w$.])([a-zA-Z_:][a-zA-Z0-9_:]*)\b(?!\s*\()")
_KEYWORDS = {"and", "or", "unless", "bool", "offset", "inf", "nan", "by", "without", "on"}
_KEYWORDS |= {"ignoring", "group_left", "group_right"}
_SERIES_SUFFIXES = {
    "counter": ("_total",),
    "histogram": ("_bucket", "_sum", "_count"),
    "summary": ("", "_sum", "_count"),
}


def promql_metric_names(expression: str) -> set[str]:
    """The metric names a PromQL expression selects: identifiers that are not
    functions, keywords, label names or values, durations, or Grafana variables."""
    stripped = _STRINGS.sub('""', expression)
    stripped = _MATCHERS.sub(" ", stripped)
    stripped = _RANGES.sub(" ", stripped)
    stripped = _GROUPINGS.sub(" ", stripped)
    return {name for name in _IDENTIFIER.findall(stripped) if name.lower() not in _KEYWORDS}


def dashboard_expressions() -> list[str]:
    dashboard = json.loads(DASHBOARD.read_text())
    return [target["expr"] for panel in dashboard["panels"] for target in panel["targets"]]


def exported_series(exposition: str) -> set[str]:
    """Every series name the exposition declares, by its families' types, whether or
    not it has samples now (a counter with no pages yet still declares its family)."""
    names: set[str] = set()
    for family in text_string_to_metric_families(exposition):
        names.update(sample.name for sample in family.samples)
        for suffix in _SERIES_SUFFIXES.get(family.type, ("",)):
            names.add(family.name + suffix)
    return names


def test_the_parser_finds_metric_names_and_nothing_else() -> None:
    expression = (
        "histogram_quantile(0.95, sum by (le, engine) (rate(pagemill_a_bucket"
        '{status="x", queue=~"ocr.*"}[$__rate_interval]))) / on (engine) group_left '
        "sum without (model) (pagemill_b_total offset 5m) * 3600 and bool pagemill_c"
    )
    assert promql_metric_names(expression) == {
        "pagemill_a_bucket",
        "pagemill_b_total",
        "pagemill_c",
    }


def test_every_metric_the_dashboard_queries_is_exported(api_url: str) -> None:
    queried = set().union(*(promql_metric_names(expr) for expr in dashboard_expressions()))
    # The panels the dashboard promises: throughput, latency, queues, device time, cost,
    # acceptance and scrape errors.
    assert {
        "pagemill_pages_processed_total",
        "pagemill_page_latency_seconds_bucket",
        "pagemill_queue_depth",
        "pagemill_device_seconds_total",
        "pagemill_cost_usd_total",
        "pagemill_spec_acceptance_rate",
        "pagemill_scrape_error",
    } <= queried
    exposition = httpx.get(f"{api_url}/metrics", timeout=30).text
    assert queried - exported_series(exposition) == set()


def test_compose_provisions_the_dashboard_and_scrapes_the_api() -> None:
    compose = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    grafana_mounts = compose["services"]["grafana"]["volumes"]
    assert "./deploy/grafana/dashboards:/var/lib/grafana/dashboards:ro" in grafana_mounts
    assert "./deploy/grafana/provisioning:/etc/grafana/provisioning:ro" in grafana_mounts
    prometheus = yaml.safe_load((ROOT / "deploy/prometheus/prometheus.yml").read_text())
    [job] = prometheus["scrape_configs"]
    assert job["static_configs"][0]["targets"] == ["api:8000"]
    for path in (ROOT / "deploy/grafana/provisioning").rglob("*.yml"):
        assert yaml.safe_load(path.read_text())["apiVersion"] == 1
    assert isinstance(json.loads(DASHBOARD.read_text())["panels"], list)
    assert Path(DASHBOARD).name == "pagemill.json"
