"""The database-backed gauges of /metrics: exact values on a hand-built world, the usable
connections as the decisions see them, bounded labels, readiness, and a query count that
does not grow with the world."""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal
from typing import Any

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from ladder import core, metrics, services
from ladder.core import Rung
from ladder.metrics import DatabaseCollector
from omniroute_admin.celery import app as celery_app
from tests.ladder.factories import (
    NOW,
    api,
    make_candidate,
    make_connection,
    make_reading,
    make_token,
)
from tests.test_ops import FakeBroker
from tests.worlds import grow_world

pytestmark = pytest.mark.django_db

# The world is built at NOW and scraped a minute later.
SCRAPE_AT = NOW + timedelta(seconds=60)

Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def settings_values(**changes: Any) -> dict[str, Any]:
    """Every tuning field (the defaults) with `changes` applied."""
    values: dict[str, Any] = {
        "exit_cutoff_percent": 2.0,
        "reentry_min_remaining_percent": 5.0,
        "cheap_budget_usd": None,
        "premium_budget_usd": None,
        "budget_window": "month",
        "max_state_age_seconds": 180,
        "base_cooldown_seconds": 5.0,
        "max_cooldown_seconds": 120.0,
        "cheap_max_input_usd_per_mtok": Decimal("1.0"),
    }
    values.update(changes)
    return values


def build_world() -> None:
    """Five connections and four candidates, every gauge with something to say:

    - claude-max-1: plan, polled, 42.5 % left at NOW: in play, current.
    - claude-max-2: plan, polled, 1.5 % left at NOW: dropped out (at or below the 2 % cutoff).
    - codex-1: plan, pushed, 80 % left 5 minutes before NOW (stale a minute later) and
      rate-limited at NOW for 90 s.
    - openai-key: uncurated key, never read; ollama-local: keyless, never read.
    - candidates: claude allowlist [claude-max-1, claude-max-2], claude pinned to
      claude-max-1, codex pinned to codex-1, openai allowlist [openai-key, ghost] (ghost is
      never registered), ollama pinned to ollama-local (category "coding").
    - premium budget 10 USD with 8 USD spent; cheap budget 0 (the rung is disabled).
    """
    services.update_settings(
        settings_values(cheap_budget_usd=Decimal(0), premium_budget_usd=Decimal(10)),
        actor="test",
    )
    make_connection("claude-max-1", quota_source="claude")
    make_connection("claude-max-2", quota_source="claude")
    make_connection("codex-1", provider="codex", auth_type="oauth")
    make_connection("openai-key", provider="openai", auth_type="apikey")
    make_connection("ollama-local", provider="ollama", auth_type="none")
    make_reading("claude-max-1", now=NOW, remaining_percent=42.5)
    make_reading("claude-max-2", now=NOW, remaining_percent=1.5)
    make_reading("codex-1", now=NOW, checked_at=NOW - timedelta(seconds=300), remaining_percent=80)
    services.apply_event("codex-1", kind="rate_limited", retry_after_seconds=90, now=NOW)
    make_candidate(
        "claude", "claude-sonnet-4-5", allowed_connection_ids=("claude-max-1", "claude-max-2")
    )
    make_candidate("claude", "claude-opus-4-1", connection_id="claude-max-1")
    make_candidate("codex", "gpt-5-codex", connection_id="codex-1")
    make_candidate("openai", "gpt-5", allowed_connection_ids=("openai-key", "ghost"))
    make_candidate("ollama", "llama3", connection_id="ollama-local", categories=("coding",))
    services.record_spend(
        services.SpendInput(
            request_id="r1",
            connection_id="openai-key",
            provider="openai",
            model="gpt-5",
            cost_usd=Decimal(8),
            occurred_at=NOW,
        ),
        now=NOW,
    )


def collect(now: Any = SCRAPE_AT) -> Samples:
    """The database collector's samples at `now`, by (name, sorted labels)."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(DatabaseCollector(now=now))
    return parse(generate_latest(registry))


def parse(exposition: bytes) -> Samples:
    """Samples of a text exposition, by (name, sorted labels)."""
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(exposition.decode())
        for sample in family.samples
    }


def by_connection(samples: Samples, name: str) -> dict[str, float]:
    """The samples of one per-connection gauge, by connection id."""
    return {
        dict(labels)["connection_id"]: value
        for (sample, labels), value in samples.items()
        if sample == name
    }


def series(samples: Samples, name: str) -> dict[tuple[tuple[str, str], ...], float]:
    """The samples of one metric, by their labels."""
    return {labels: value for (sample, labels), value in samples.items() if sample == name}


@pytest.fixture
def world() -> None:
    build_world()


# --- per connection -------------------------------------------------------------------


@pytest.mark.usefixtures("world")
def test_remaining_percent_is_the_current_readings_and_absent_when_never_read() -> None:
    samples = collect()

    assert by_connection(samples, "omniroute_connection_remaining_percent") == {
        "claude-max-1": 42.5,
        "claude-max-2": 1.5,
        "codex-1": 80.0,
    }


@pytest.mark.usefixtures("world")
def test_in_play_is_1_for_in_play_and_0_for_a_dropped_out_connection() -> None:
    samples = collect()

    assert by_connection(samples, "omniroute_connection_in_play") == {
        "claude-max-1": 1.0,
        "claude-max-2": 0.0,
        "codex-1": 1.0,
        "ollama-local": 1.0,
        "openai-key": 1.0,
    }


@pytest.mark.usefixtures("world")
def test_reading_current_is_0_for_a_stale_reading_and_for_one_never_read() -> None:
    samples = collect()

    assert by_connection(samples, "omniroute_connection_reading_current") == {
        "claude-max-1": 1.0,
        "claude-max-2": 1.0,
        "codex-1": 0.0,
        "ollama-local": 0.0,
        "openai-key": 0.0,
    }


@pytest.mark.usefixtures("world")
def test_a_reading_exactly_max_age_old_is_still_current() -> None:
    samples = collect(NOW + timedelta(seconds=180))

    assert by_connection(samples, "omniroute_connection_reading_current")["claude-max-1"] == 1.0
    later = collect(NOW + timedelta(seconds=180, microseconds=1))
    assert by_connection(later, "omniroute_connection_reading_current")["claude-max-1"] == 0.0


@pytest.mark.usefixtures("world")
def test_cooldown_gauges_count_down_to_the_cooldowns_end_and_then_read_0() -> None:
    samples = collect()
    ended = collect(NOW + timedelta(seconds=90))

    assert by_connection(samples, "omniroute_connection_cooling_down") == {
        "claude-max-1": 0.0,
        "claude-max-2": 0.0,
        "codex-1": 1.0,
        "ollama-local": 0.0,
        "openai-key": 0.0,
    }
    assert by_connection(samples, "omniroute_connection_cooldown_remaining_seconds") == {
        "claude-max-1": 0.0,
        "claude-max-2": 0.0,
        "codex-1": 30.0,
        "ollama-local": 0.0,
        "openai-key": 0.0,
    }
    assert by_connection(ended, "omniroute_connection_cooling_down")["codex-1"] == 0.0
    assert by_connection(ended, "omniroute_connection_cooldown_remaining_seconds")["codex-1"] == 0.0


@pytest.mark.usefixtures("world")
def test_reading_age_is_seconds_since_the_current_readings_checked_at() -> None:
    samples = collect()

    assert by_connection(samples, "omniroute_reading_age_seconds") == {
        "claude-max-1": 60.0,
        "claude-max-2": 60.0,
        "codex-1": 360.0,
    }


@pytest.mark.usefixtures("world")
def test_connection_info_names_billing_and_quota_source_of_every_connection() -> None:
    samples = collect()

    assert series(samples, "omniroute_connection_info") == {
        (
            ("auth_type", auth_type),
            ("billing", billing),
            ("connection_id", connection_id),
            ("provider", provider),
            ("quota_source", quota_source),
        ): 1.0
        for connection_id, provider, auth_type, billing, quota_source in (
            ("claude-max-1", "claude", "oauth", "subscription", "claude"),
            ("claude-max-2", "claude", "oauth", "subscription", "claude"),
            ("codex-1", "codex", "oauth", "subscription", "none"),
            ("ollama-local", "ollama", "none", "keyless", "none"),
            ("openai-key", "openai", "apikey", "unknown", "none"),
        )
    }


# --- per rung and tuning ----------------------------------------------------------------


@pytest.mark.usefixtures("world")
def test_usable_connections_per_rung_of_each_flat_auto_id() -> None:
    samples = collect()

    assert series(samples, "omniroute_rung_usable_connections") == {
        (("auto_id", "auto/subscription"), ("rung", "subscription")): 1.0,
        (("auto_id", "auto/thrifty"), ("rung", "subscription")): 1.0,
        (("auto_id", "auto/thrifty"), ("rung", "keyless")): 1.0,
        (("auto_id", "auto/thrifty"), ("rung", "free")): 0.0,
        (("auto_id", "auto/thrifty"), ("rung", "cheap")): 0.0,
        (("auto_id", "auto/thrifty"), ("rung", "premium")): 2.0,
    }


@pytest.mark.usefixtures("world")
def test_usable_connections_are_what_the_served_decisions_contain() -> None:
    samples = collect()

    for auto_id in core.ADVERTISED_AUTO_IDS:
        decision = services.decide_registered(auto_id, now=SCRAPE_AT)
        served = core.usable_connections(decision)
        reported = {
            Rung.from_label(dict(labels)["rung"]): value
            for labels, value in series(samples, "omniroute_rung_usable_connections").items()
            if dict(labels)["auto_id"] == auto_id.auto_id
        }
        assert reported == {rung: float(served[rung]) for rung in reported}
        assert sum(served.values()) == sum(reported.values())


def test_usable_connections_match_the_served_decisions_on_500_bulk_connections() -> None:
    grow_world(500, NOW)
    services.update_settings(settings_values(cheap_budget_usd=Decimal(0)), actor="test")

    usable = series(collect(NOW), "omniroute_rung_usable_connections")

    for auto_id in core.ADVERTISED_AUTO_IDS:
        served = core.usable_connections(services.decide_registered(auto_id, now=NOW))
        for rung, count in served.items():
            key = (("auto_id", auto_id.auto_id), ("rung", rung.label))
            assert usable.get(key, 0.0) == float(count)
    # The bulk world leaves something usable on several rungs, so the match means something.
    assert sum(1 for value in usable.values() if value > 0) >= 3


@pytest.mark.usefixtures("world")
def test_a_budget_exhausted_rung_has_no_usable_connection() -> None:
    services.update_settings(
        settings_values(cheap_budget_usd=Decimal(0), premium_budget_usd=Decimal(8)),
        actor="test",
    )

    samples = collect()

    usable = series(samples, "omniroute_rung_usable_connections")
    assert usable[(("auto_id", "auto/thrifty"), ("rung", "premium"))] == 0.0
    assert series(samples, "omniroute_rung_budget_used_percent") == {(("rung", "premium"),): 100.0}


@pytest.mark.usefixtures("world")
def test_spend_budget_and_budget_used_percent_per_paid_rung() -> None:
    samples = collect()

    assert series(samples, "omniroute_rung_spend_usd") == {
        (("rung", "cheap"),): 0.0,
        (("rung", "premium"),): 8.0,
    }
    assert series(samples, "omniroute_rung_budget_usd") == {
        (("rung", "cheap"),): 0.0,
        (("rung", "premium"),): 10.0,
    }
    # A budget of 0 disables the rung: no percent of it is meaningful.
    assert series(samples, "omniroute_rung_budget_used_percent") == {(("rung", "premium"),): 80.0}


@pytest.mark.usefixtures("world")
def test_spend_of_the_previous_window_is_not_counted() -> None:
    samples = collect(NOW.replace(month=12, day=1))

    assert series(samples, "omniroute_rung_spend_usd")[(("rung", "premium"),)] == 0.0
    assert series(samples, "omniroute_rung_budget_used_percent") == {(("rung", "premium"),): 0.0}


@pytest.mark.usefixtures("world")
def test_the_tuning_the_gauges_are_judged_against_is_exported() -> None:
    services.update_settings(
        settings_values(exit_cutoff_percent=3.5, max_state_age_seconds=240), actor="test"
    )

    samples = collect()

    assert samples[("omniroute_exit_cutoff_percent", ())] == 3.5
    assert samples[("omniroute_max_reading_age_seconds", ())] == 240.0


def test_an_empty_world_reports_no_connection_and_zero_usable() -> None:
    samples = collect()

    assert by_connection(samples, "omniroute_connection_in_play") == {}
    assert set(series(samples, "omniroute_rung_usable_connections").values()) == {0.0}
    assert series(samples, "omniroute_rung_budget_usd") == {}
    assert series(samples, "omniroute_rung_budget_used_percent") == {}


# --- bounded labels ---------------------------------------------------------------------


@pytest.mark.usefixtures("world")
def test_usable_connections_name_only_the_flat_auto_ids_whatever_the_categories() -> None:
    # A candidate lists "coding", so auto/coding:subscription and auto/coding:thrifty are
    # published; their pools are subsets of the flat ones and add no series.
    samples = collect()

    auto_ids = {
        dict(labels)["auto_id"] for labels in series(samples, "omniroute_rung_usable_connections")
    }
    assert auto_ids == {"auto/subscription", "auto/thrifty"}


@pytest.mark.usefixtures("world")
def test_request_supplied_strings_never_become_labels(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(celery_app, "connection_for_write", FakeBroker().connection_for_write)
    gateway = make_token()
    # A gateway-supplied pool names a category and a connection nobody registered.
    posted = api(
        "post",
        "/api/v1/pools/auto/invented-category:thrifty",
        gateway,
        {
            "candidates": [
                {
                    "provider": "openai",
                    "model": "gpt-5",
                    "categories": ["invented-category"],
                    "connection_id": "request-conn-xyz",
                }
            ]
        },
    )
    assert posted.status_code == 200
    assert api("get", "/api/v1/pools/auto/<script>:subscription", gateway).status_code == 404

    body = Client().get("/metrics").content.decode()

    assert "invented-category" not in body
    assert "request-conn-xyz" not in body
    assert "<script>" not in body
    assert "ghost" not in body  # a candidate's unregistered id is no connection series
    assert 'auto_id="auto/<other>:thrifty",outcome="served"' in body


# --- readiness --------------------------------------------------------------------------


def test_dependency_up_is_1_for_each_dependency_that_answers(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(celery_app, "connection_for_write", FakeBroker().connection_for_write)

    samples = scrape()

    assert series(samples, "omniroute_dependency_up") == {
        (("dependency", "broker"),): 1.0,
        (("dependency", "database"),): 1.0,
    }


def test_dependency_up_is_0_for_a_broker_that_refuses(monkeypatch: pytest.MonkeyPatch) -> None:
    broker = FakeBroker(error=ConnectionRefusedError("connection refused"))
    monkeypatch.setattr(celery_app, "connection_for_write", broker.connection_for_write)

    samples = scrape()

    assert series(samples, "omniroute_dependency_up") == {
        (("dependency", "broker"),): 0.0,
        (("dependency", "database"),): 1.0,
    }
    assert broker.ensured == 1


def scrape() -> Samples:
    response = Client().get("/metrics")
    assert response.status_code == 200
    return parse(response.content)


# --- query count ------------------------------------------------------------------------

# A scrape: settings, catalog, prices, window spend, connections, candidates, forecast
# against outcome (the database collector) and the readiness probe's SELECT 1.
SCRAPE_QUERIES = 9  # eight for the world, one for the beat's heartbeat


@pytest.mark.parametrize("size", [1, 500])
def test_a_scrape_runs_a_fixed_number_of_queries(
    size: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(celery_app, "connection_for_write", FakeBroker().connection_for_write)
    grow_world(size, NOW)
    services.update_settings(settings_values(premium_budget_usd=Decimal(10)), actor="test")
    assert services.registered_candidates()  # the world has candidates to decide over

    with CaptureQueriesContext(connection) as captured:
        response = Client().get("/metrics")

    assert response.status_code == 200
    assert len(captured.captured_queries) == SCRAPE_QUERIES
    assert len(by_connection(parse(response.content), "omniroute_connection_in_play")) == size


@pytest.mark.django_db
def test_forecast_against_outcome_is_a_metric_per_plan_connection() -> None:
    from datetime import timedelta

    from ladder.models import Connection, WindowForecast
    from ladder.services import operations_state
    from tests.ladder.factories import NOW, make_connection

    make_connection("claude-max-1")
    plan = Connection.objects.get()
    for hours, ran_out_after in ((5, 300), (10, None), (15, -120)):
        WindowForecast.objects.create(
            connection=plan,
            window_reset_at=NOW - timedelta(hours=hours),
            forecast_at=NOW - timedelta(hours=hours + 2),
            runs_out_at=NOW - timedelta(hours=hours + 1),
            before_reset=True,
            basis="b",
            ran_out_at=None
            if ran_out_after is None
            else NOW - timedelta(hours=hours + 1) + timedelta(seconds=ran_out_after),
            closed_at=NOW - timedelta(hours=hours),
        )

    families = {
        family.name: [(sample.labels, sample.value) for sample in family.samples]
        for family in metrics.forecast_families(operations_state(now=NOW))
    }

    assert families == {
        # The newest window that ran out: 5 minutes later than forecast.
        "omniroute_forecast_error_seconds": [({"connection_id": "claude-max-1"}, 300.0)],
        "omniroute_forecast_windows": [
            ({"connection_id": "claude-max-1", "outcome": "did_not_run_out"}, 1.0),
            ({"connection_id": "claude-max-1", "outcome": "ran_out_as_forecast"}, 2.0),
        ],
    }
