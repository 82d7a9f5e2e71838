"""The shipped monitoring files: docs/ops/prometheus-rules.yml passes `promtool check
rules` and its unit tests, and every query of the rules and of
docs/ops/grafana-dashboard.json names a metric a live /metrics scrape exports."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from django.test import Client
from django.utils import timezone
from prometheus_client.parser import text_string_to_metric_families

from ladder import beat

# Imported by every web process (wsgi, asgi): its gauge is always exported there.
from omniroute_admin import change_feed, ops  # noqa: F401
from omniroute_admin.celery import app as celery_app
from tests.ladder.factories import api, make_token
from tests.test_metrics import build_world
from tests.test_ops import FakeBroker

ROOT = Path(__file__).resolve().parent.parent
OPS = ROOT / "docs" / "ops"
RULES = OPS / "prometheus-rules.yml"
RULE_TESTS = OPS / "prometheus-rules.test.yml"
DASHBOARD = OPS / "grafana-dashboard.json"
README = OPS / "README.md"

# Series Prometheus itself writes for every scrape target; rules may name them.
SCRAPE_SERIES = frozenset({"up"})

# --- PromQL metric names ----------------------------------------------------------------

_STRING = re.compile(r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'|`[^`]*`')
_NAME_MATCHER = re.compile(r'__name__\s*=\s*"((?:[^"\\]|\\.)*)"')
_MATCHERS = re.compile(r"\{[^}]*\}")
_RANGES = re.compile(r"\[[^\]]*\]")
_GROUPING = re.compile(r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)")
_GRAFANA_VARIABLE = re.compile(r"\$\{?\w+\}?")
_IDENTIFIER = re.compile(r"(?<![\w.:])([A-Za-z_:][\w:]*)(\s*\()?")
_KEYWORDS = frozenset(
    {
        "and",
        "or",
        "unless",
        "bool",
        "by",
        "without",
        "on",
        "ignoring",
        "group_left",
        "group_right",
        "offset",
        "inf",
        "nan",
    }
)


def metric_names(expr: str) -> set[str]:
    """The metric names a PromQL expression selects: not functions or aggregations
    (followed by a parenthesis), keywords, label names in matchers or `by (...)` lists,
    durations, strings or Grafana variables."""
    names = {match.group(1) for match in _NAME_MATCHER.finditer(expr)}
    text = _STRING.sub('""', expr)  # before the braces: a string may hold "}" or "("
    text = re.sub(r"#[^\n]*", " ", text)
    for pattern in (_MATCHERS, _RANGES, _GROUPING, _GRAFANA_VARIABLE):
        text = pattern.sub(" ", text)
    for match in _IDENTIFIER.finditer(text):
        name, call = match.groups()
        if call is None and name.lower() not in _KEYWORDS:
            names.add(name)
    return names


@pytest.mark.parametrize(
    ("expr", "names"),
    [
        pytest.param("omniroute_connection_in_play", {"omniroute_connection_in_play"}, id="bare"),
        pytest.param(
            "histogram_quantile(0.95, sum by (le) "
            '(rate(omniroute_decision_seconds_bucket{job="a",le!="0.5"}[5m])))',
            {"omniroute_decision_seconds_bucket"},
            id="histogram",
        ),
        pytest.param(
            "sum(rate(a_total[$__rate_interval])) / on (instance) group_left () b offset 5m",
            {"a_total", "b"},
            id="group-left-offset",
        ),
        pytest.param(
            'up{job="omniroute-admin"} == 0 or omniroute_dependency_up == bool 0',
            {"up", "omniroute_dependency_up"},
            id="set-and-bool",
        ),
        pytest.param("time() - max(x) > 1e3 or absent(y)", {"x", "y"}, id="number-and-calls"),
        pytest.param('{__name__="z", a="b"}', {"z"}, id="name-matcher"),
        pytest.param(
            'max without (instance) (m{label="sum(q) } x"})', {"m"}, id="string-with-syntax"
        ),
        pytest.param("max_over_time(m:rate5m[1h:30s]) by (c)", {"m:rate5m"}, id="subquery"),
        pytest.param("sum by(le)(rate(h_bucket[5m]))", {"h_bucket"}, id="no-spaces"),
        pytest.param("count(m_info{billing=~'sub.*'}) > 0 and on() vector(1)", {"m_info"}, id="q"),
    ],
)
def test_metric_names_are_extracted_from_promql(expr: str, names: set[str]) -> None:
    assert metric_names(expr) == names


# --- the files ------------------------------------------------------------------------


def load_rules() -> list[dict[str, Any]]:
    return [
        rule for group in yaml.safe_load(RULES.read_text())["groups"] for rule in group["rules"]
    ]


def load_dashboard() -> dict[str, Any]:
    return json.loads(DASHBOARD.read_text())


def dashboard_panels(dashboard: dict[str, Any]) -> list[dict[str, Any]]:
    """Every panel, those inside collapsed rows included."""
    panels = []
    for panel in dashboard["panels"]:
        panels.append(panel)
        panels.extend(panel.get("panels", []))
    return panels


def dashboard_exprs() -> list[str]:
    return [
        target["expr"]
        for panel in dashboard_panels(load_dashboard())
        for target in panel.get("targets", [])
    ]


def rule_exprs() -> list[str]:
    return [rule["expr"] for rule in load_rules()]


ALERTS = {
    "OmnirouteControlPlaneNotReady",
    "OmnirouteBeatDead",
    "OmniroutePlanExhausted",
    "OmnirouteRungBudget80Percent",
    "OmnirouteRungBudgetExhausted",
    "OmnirouteReadingsStale",
    "OmnirouteSubscriptionPoolEmpty",
}


def test_every_alert_has_a_for_a_severity_and_a_summary_and_description() -> None:
    rules = load_rules()

    assert {rule["alert"] for rule in rules} == ALERTS
    for rule in rules:
        assert re.fullmatch(r"\d+[smh]", rule["for"]), rule["alert"]
        assert rule["labels"]["severity"] in {"critical", "warning"}, rule["alert"]
        assert set(rule["annotations"]) == {"summary", "description"}, rule["alert"]


def test_every_alert_is_unit_tested_firing_and_silent() -> None:
    cases = [
        case
        for test in yaml.safe_load(RULE_TESTS.read_text())["tests"]
        for case in test["alert_rule_test"]
    ]

    fired = {case["alertname"] for case in cases if case["exp_alerts"]}
    silent = {case["alertname"] for case in cases if not case["exp_alerts"]}
    assert fired == ALERTS
    assert silent == ALERTS


def test_the_dashboard_is_a_grafana_dashboard_with_a_prometheus_query_per_panel() -> None:
    dashboard = load_dashboard()

    assert dashboard["uid"] == "omniroute-admin"
    assert dashboard["title"] == "OmniRoute Admin"
    assert isinstance(dashboard["schemaVersion"], int)
    variables = {variable["name"]: variable for variable in dashboard["templating"]["list"]}
    assert variables["datasource"]["type"] == "datasource"
    assert variables["datasource"]["query"] == "prometheus"
    panels = dashboard_panels(dashboard)
    ids = [panel["id"] for panel in panels]
    assert len(ids) == len(set(ids))
    for panel in panels:
        grid = panel["gridPos"]
        assert grid["x"] >= 0, panel["title"]
        assert grid["x"] + grid["w"] <= 24, panel["title"]
        if panel["type"] == "row":
            continue
        assert panel["datasource"] == {"type": "prometheus", "uid": "${datasource}"}
        refs = [target["refId"] for target in panel["targets"]]
        assert refs, panel["title"]
        assert len(refs) == len(set(refs)), panel["title"]
        assert all(target["expr"].strip() for target in panel["targets"]), panel["title"]


def test_panels_do_not_overlap() -> None:
    cells: dict[tuple[int, int], str] = {}
    for panel in dashboard_panels(load_dashboard()):
        grid = panel["gridPos"]
        for x in range(grid["x"], grid["x"] + grid["w"]):
            for y in range(grid["y"], grid["y"] + grid["h"]):
                assert (x, y) not in cells, (panel["title"], cells.get((x, y)))
                cells[(x, y)] = panel["title"]


EXPORTED_FAMILIES = {
    "omniroute_change_feed_waiters",
    "omniroute_decisions",
    "omniroute_decision_seconds",
    "omniroute_gateway_events",
    "omniroute_login_throttle_unavailable",
    "omniroute_connection_info",
    "omniroute_connection_remaining_percent",
    "omniroute_connection_in_play",
    "omniroute_connection_reading_current",
    "omniroute_connection_cooling_down",
    "omniroute_connection_cooldown_remaining_seconds",
    "omniroute_reading_age_seconds",
    "omniroute_rung_usable_connections",
    "omniroute_rung_spend_usd",
    "omniroute_rung_budget_usd",
    "omniroute_rung_budget_used_percent",
    "omniroute_forecast_error_seconds",
    "omniroute_forecast_windows",
    "omniroute_exit_cutoff_percent",
    "omniroute_max_reading_age_seconds",
    "omniroute_dependency_up",
    "omniroute_beat_last_run_timestamp_seconds",
    "omniroute_beat_heartbeat_age_seconds",
    "omniroute_beat_heartbeat_max_age_seconds",
}


# --- promtool ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def promtool() -> str:
    """Debian's promtool. Missing fails in CI and skips locally."""
    path = shutil.which("promtool")
    if path is None:
        message = "promtool is missing: install Debian's prometheus package."
        if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
            pytest.fail(message)
        pytest.skip(message)
    return path


def run(command: list[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)


def test_the_rules_pass_promtool_check_rules(promtool: str) -> None:
    result = run([promtool, "check", "rules", str(RULES)])

    assert result.returncode == 0, result.stdout + result.stderr
    assert f"SUCCESS: {len(ALERTS)} rules found" in result.stdout


def test_the_rules_pass_their_promtool_unit_tests(promtool: str) -> None:
    result = run([promtool, "test", "rules", str(RULE_TESTS)])

    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS" in result.stdout


def test_promtool_check_rules_refuses_a_broken_rule(promtool: str, tmp_path: Path) -> None:
    # The check can fail: a rule with a PromQL syntax error is refused.
    broken = tmp_path / "broken.yml"
    broken.write_text(
        "groups:\n  - name: g\n    rules:\n      - alert: A\n        expr: sum by (x (y)\n"
    )

    result = run([promtool, "check", "rules", str(broken)])

    assert result.returncode != 0


# --- against a live scrape --------------------------------------------------------------


@pytest.fixture
def exported(monkeypatch: pytest.MonkeyPatch) -> set[str]:
    """Sample names of a /metrics scrape over the hand-built world, after a decision
    and a gateway event (labelled counters have no samples until first incremented)."""
    monkeypatch.setattr(celery_app, "connection_for_write", FakeBroker().connection_for_write)
    build_world()
    beat.record_heartbeat(timezone.now())  # the beat gauges are absent before the first
    token = make_token()
    assert api("get", "/api/v1/pools/auto/thrifty", token).status_code == 200
    event = api("post", "/api/v1/connections/codex-1/events", token, {"kind": "success"})
    assert event.status_code == 200
    response = Client().get("/metrics")
    assert response.status_code == 200
    return {
        sample.name
        for family in text_string_to_metric_families(response.content.decode())
        for sample in family.samples
    }


@pytest.mark.django_db
def test_every_dashboard_query_names_only_exported_metrics(exported: set[str]) -> None:
    named = {name for expr in dashboard_exprs() for name in metric_names(expr)}

    assert named - exported == set()
    # The histogram is queried through its series, as exported.
    assert {
        "omniroute_decision_seconds_bucket",
        "omniroute_decision_seconds_sum",
        "omniroute_decision_seconds_count",
        "omniroute_decisions_total",
    } <= named


@pytest.mark.django_db
def test_every_rule_names_only_exported_metrics_or_scrape_up(exported: set[str]) -> None:
    named = {name for expr in rule_exprs() for name in metric_names(expr)}

    assert named - exported - SCRAPE_SERIES == set()


@pytest.mark.django_db
def test_every_exported_metric_is_prefixed_has_help_and_is_documented(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(celery_app, "connection_for_write", FakeBroker().connection_for_write)
    build_world()
    response = Client().get("/metrics")
    families = list(text_string_to_metric_families(response.content.decode()))
    readme = README.read_text()

    assert {family.name for family in families} == EXPORTED_FAMILIES
    for family in families:
        assert family.name.startswith("omniroute_"), family.name
        assert family.documentation.strip(), family.name
        assert f"`{family.name}" in readme, family.name
