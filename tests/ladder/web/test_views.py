"""The ladder's dashboard pages: what each shows on the demo world, at a pinned `now`."""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal
from typing import Any

import pytest
from django.test import Client

from billing.models import AuditEntry, BillingCatalogEntry
from ladder import beat
from ladder.core.settings_bounds import SETTINGS_BOUNDS, settings_problems
from ladder.models import ApiToken, Connection, LadderSettings, QuotaReading
from ladder.services import enqueue
from ladder.tokens import hash_secret
from omniroute_admin import dashboard
from tests.ladder.factories import (
    NOW,
    api,
    make_candidate,
    make_connection,
    make_reading,
    make_token,
)
from tests.pages import parse
from tests.worlds import grow_world, htmx_headers, seed_demo_world, signed_in

SETTINGS_DEFAULTS: dict[str, Any] = {
    "exit_cutoff_percent": 0.0,
    "reentry_min_remaining_percent": 100.0,
    "cheap_budget_usd": None,
    "premium_budget_usd": None,
    "budget_window": "month",
    "max_state_age_seconds": 180,
    "base_cooldown_seconds": 5.0,
    "max_cooldown_seconds": 120.0,
    "cheap_max_input_usd_per_mtok": Decimal(1),
}

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _pinned_now(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(dashboard, "current_time", lambda: NOW)


@pytest.fixture
def demo() -> None:
    seed_demo_world(NOW, history=False)


@pytest.fixture
def operator(client: Client) -> Client:
    return signed_in(client, "olga", "operator")


@pytest.fixture
def viewer(client: Client) -> Client:
    return signed_in(client, "victor", "viewer")


def _row(page: Any, connection_id: str) -> Any:
    rows = page.find_all(
        lambda e: e.tag == "tr" and e.attrs.get("data-connection") == connection_id
    )
    assert len(rows) == 1
    return rows[0]


def _cells(row: Any) -> list[str]:
    return [cell.text for cell in row.by_tag("td")]


# --- overview ------------------------------------------------------------------------------


def test_overview_counts_usable_and_excluded_connections_per_rung(
    demo: None, viewer: Client
) -> None:
    page = parse(viewer.get("/").content)

    cards = page.by_class("rung-card")

    assert [card.by_tag("h3")[0].text for card in cards] == [
        "subscription",
        "keyless",
        "free",
        "cheap",
        "premium",
    ]
    assert [
        (card.by_class("count-usable")[0].text, card.by_class("count-excluded")[0].text)
        for card in cards
    ] == [
        ("2 usable", "2 excluded"),
        ("1 usable", "0 excluded"),
        ("0 usable", "1 excluded"),
        ("1 usable", "0 excluded"),
        ("2 usable", "0 excluded"),
    ]


def test_overview_shows_paid_rung_spend_against_budget(demo: None, viewer: Client) -> None:
    page = parse(viewer.get("/").content)

    budgets = [budget.by_class("budget-label")[0].text for budget in page.by_class("budget")]

    assert budgets == ["cheap 1.84 USD of 5.00", "premium 10.35 USD of 20.00"]


def test_overview_explains_a_budget_of_zero_and_no_budget(demo: None, viewer: Client) -> None:
    LadderSettings.objects.filter(pk=1).update(cheap_budget_usd=None, premium_budget_usd=0)

    page = parse(viewer.get("/").content)

    states = [budget.by_class("budget-state")[0].text for budget in page.by_class("budget")]
    assert states == ["No budget: ordered, never gated.", "Budget 0: the rung is disabled."]


def test_overview_has_no_stale_banner_while_readings_are_fresh(demo: None, viewer: Client) -> None:
    page = parse(viewer.get("/").content)

    assert page.by_class("banner") == []
    assert "4 of 4 have a reading" in page.by_id("ladder-status").text


def test_overview_says_since_when_readings_are_stale_while_the_beat_and_a_worker_run(
    demo: None, viewer: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The newest polled reading is 20 s before NOW; max age 180 s: stale from NOW + 160 s.
    monkeypatch.setattr(dashboard, "current_time", lambda: NOW + timedelta(minutes=10))
    # The heartbeat is fresh (else the outage banner speaks: tests/test_beat_heartbeat.py).
    beat.record_heartbeat(NOW + timedelta(minutes=10))

    page = parse(viewer.get("/").content)

    (banner,) = page.by_class("banner")
    assert banner.text.startswith("Readings stale since 2026-11-29 12:02:40 UTC.")
    assert "the beat, a worker and the broker run, so are the polls failing" in banner.text


def test_overview_shows_the_next_reset(demo: None, viewer: Client) -> None:
    page = parse(viewer.get("/").content)

    resets = page.find_all(
        lambda e: e.tag == "time" and e.attrs.get("datetime") == "2026-11-29T12:37:00Z"
    )
    # The browser tells the distance ("12:37:00 UTC (in 37 min)"); the server writes the
    # instant only, the same bytes on every poll.
    assert [(e.text, e.attrs["data-relative"], e.attrs["data-absolute"]) for e in resets] == [
        ("12:37:00 UTC", "future", "12:37:00 UTC")
    ]


def test_overview_says_an_empty_subscription_pool_is_intended(viewer: Client) -> None:
    page = parse(viewer.get("/").content)

    facts = page.by_class("facts")[0].text
    assert "auto/subscription empty: no plan quota is verified usable now." in facts


# --- connections ---------------------------------------------------------------------------


def test_connections_row_shows_verdict_entry_rung_quota_hysteresis_and_reading(
    demo: None, viewer: Client
) -> None:
    page = parse(viewer.get("/connections/").content)

    cells = _cells(_row(page, "codex-plus"))

    assert cells == [
        "codex-plus ChatGPT Plus (Codex) codex · oauth",
        "subscription overage hard-stop entry 2 codex/oauth",
        "subscription",
        "3.5 % left resets 2026-11-29 12:37:00 UTC",
        "dropped out since 2026-11-29 11:57:00 UTC 1.0 % left, at or below the exit cutoff "
        "of 2 %; re-entry needs more than 5 %",
        "none",
        "2026-11-29 11:59:40 UTC via simulated",
    ]
    # Each instant told by the browser as its distance: "resets in 37 min", "since 3 min
    # ago", "20 s ago via simulated".
    assert [
        (e.attrs["datetime"], e.attrs["data-relative"])
        for e in _row(page, "codex-plus").find_all(lambda e: "data-relative" in e.attrs)
    ] == [
        ("2026-11-29T12:37:00Z", "future"),
        ("2026-11-29T11:57:00Z", "past"),
        ("2026-11-29T11:59:40Z", "past"),
    ]


def test_connections_links_the_catalog_entry_that_decided_the_verdict(
    demo: None, viewer: Client
) -> None:
    page = parse(viewer.get("/connections/").content)

    entry = BillingCatalogEntry.objects.get(provider="groq")
    links = [(a.text, a.attrs["href"]) for a in _row(page, "groq-key").by_tag("a")]

    assert links[1] == (f"entry {entry.pk}", f"/catalog/#entry-{entry.pk}")
    assert f"entry {entry.pk} groq/*" in _row(page, "groq-key").text


def test_connections_marks_uncurated_cooldown_and_quota_error(demo: None, viewer: Client) -> None:
    page = parse(viewer.get("/connections/").content)

    assert "no entry: uncurated, counts as metered" in _row(page, "anthropic-key").text
    assert "cooling down until 12:01:35 UTC" in _row(page, "groq-key").text
    assert "quota error 401 from the usage endpoint" in _row(page, "cursor-pro").text


def test_connections_rung_of_a_metered_key_comes_from_its_models(
    demo: None, viewer: Client
) -> None:
    page = parse(viewer.get("/connections/").content)

    assert _cells(_row(page, "openai-key"))[2] == "cheap premium by model tier"


def test_connections_quota_bar_marks_fill_and_both_thresholds(demo: None, viewer: Client) -> None:
    page = parse(viewer.get("/connections/").content)

    bar = _row(page, "claude-max-1").by_class("quota-bar")[0]

    assert bar.by_class("bar-fill")[0].attrs["width"] == "64"
    assert bar.by_class("mark-exit")[0].attrs["x1"] == "2.0"
    assert bar.by_class("mark-floor")[0].attrs["x1"] == "5.0"


def test_connections_search_filters_rows(demo: None, viewer: Client) -> None:
    page = parse(viewer.get("/connections/?q=claude").content)

    shown = [
        row.attrs["data-connection"]
        for row in page.find_all(lambda e: "data-connection" in e.attrs)
    ]
    assert shown == ["anthropic-key", "claude-max-1", "claude-max-2"]


def test_a_nul_in_the_connections_search_is_dropped_not_a_crash(demo: None, viewer: Client) -> None:
    # PostgreSQL refuses a NUL in a query parameter: the search drops it instead.
    def shown(url: str) -> list[str]:
        response = viewer.get(url)
        assert response.status_code == 200
        page = parse(response.content)
        return [
            str(row.attrs["data-connection"])
            for row in page.find_all(lambda e: "data-connection" in e.attrs)
        ]

    assert shown("/connections/?q=%00") == shown("/connections/")
    assert shown("/connections/?q=cla%00ude") == ["anthropic-key", "claude-max-1", "claude-max-2"]


@pytest.mark.parametrize("path", ["%00", "a%00b", "a%0Db", "a b", "x" * 129])
def test_a_connection_page_for_an_impossible_id_is_a_404_without_a_lookup(
    demo: None, viewer: Client, path: str
) -> None:
    # A NUL would reach PostgreSQL as a parameter it refuses (500): such an id matches
    # no URL at all.
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    with CaptureQueriesContext(connection) as queries:
        response = viewer.get(f"/connections/{path}/")

    assert response.status_code == 404
    assert not [q for q in queries.captured_queries if "ladder_connection" in q["sql"]]


def test_connections_page_past_the_end_shows_the_last_page(demo: None, viewer: Client) -> None:
    grow_world(150, NOW)  # 158 connections: two pages of 100
    ids = sorted(Connection.objects.values_list("connection_id", flat=True))

    response = viewer.get("/connections/?page=99")

    assert response.status_code == 200
    page = parse(response.content)
    shown = [
        row.attrs["data-connection"]
        for row in page.find_all(lambda e: "data-connection" in e.attrs)
    ]
    assert shown == ids[100:]
    assert page.by_class("pager")[0].find_all(lambda e: e.tag == "span")[0].text == "Page 2 of 2"


def test_refresh_of_a_connection_without_quota_source_says_why(
    demo: None, operator: Client
) -> None:
    response = operator.post(
        "/connections/groq-key/refresh/", headers=htmx_headers("refresh-notice")
    )

    assert response.status_code == 409
    notice = parse(response.content).by_id("refresh-notice")
    assert notice.text.startswith("Connection 'groq-key' has no quota source")


def test_refresh_when_the_broker_is_down_says_nothing_was_queued(
    demo: None, operator: Client, monkeypatch: pytest.MonkeyPatch
) -> None:

    def broker_down(*args: Any, **kwargs: Any) -> None:
        raise ConnectionRefusedError

    monkeypatch.setattr(enqueue, "send_refresh", broker_down)

    response = operator.post(
        "/connections/claude-max-1/refresh/", headers=htmx_headers("refresh-notice")
    )

    assert response.status_code == 503
    assert "The task broker is down: nothing was queued." in parse(response.content).text


def test_refresh_queues_a_poll(
    demo: None, operator: Client, monkeypatch: pytest.MonkeyPatch
) -> None:

    queued: list[dict[str, Any]] = []
    monkeypatch.setattr(enqueue, "send_refresh", lambda **kwargs: queued.append(kwargs))

    response = operator.post(
        "/connections/claude-max-1/refresh/", headers=htmx_headers("refresh-notice")
    )

    assert response.status_code == 202
    assert [call["kwargs"]["connection_id"] for call in queued] == ["claude-max-1"]


def test_refresh_without_javascript_redirects_with_the_message(
    demo: None, operator: Client
) -> None:
    response = operator.post("/connections/groq-key/refresh/", follow=True)

    assert response.redirect_chain == [("/connections/", 302)]
    messages = parse(response.content).by_class("messages")[0].text
    assert messages.startswith("Connection 'groq-key' has no quota source")


# --- connection detail -----------------------------------------------------------------------


def test_detail_chart_plots_the_day_of_readings_and_marks_transitions(viewer: Client) -> None:
    make_connection("claude-max-1")
    for minutes, remaining in ((300, 40.0), (200, 1.0), (100, 3.0), (50, 80.0)):
        make_reading(remaining_percent=remaining, now=NOW - timedelta(minutes=minutes))
    make_reading(remaining_percent=60.0, now=NOW - timedelta(hours=30))  # outside the day

    page = parse(viewer.get("/connections/claude-max-1/").content)

    chart = page.by_class("chart")[0]
    assert [point.by_tag("title")[0].text for point in chart.by_class("chart-point")] == [
        "07:00:00 UTC: 40.0 % left (SAFE)",
        "08:40:00 UTC: 1.0 % left (SAFE)",
        "10:20:00 UTC: 3.0 % left (SAFE)",
        "11:10:00 UTC: 80.0 % left (SAFE)",
    ]
    assert [mark.attrs["class"] for mark in chart.by_class("chart-transition")] == [
        "chart-transition transition-in_play",
        "chart-transition transition-dropped_out",
    ]
    # The last table: the transitions (the chart's readings table comes first).
    assert [" ".join(_cells(row)) for row in page.by_tag("tbody")[-1].by_tag("tr")] == [
        "2026-11-29 11:10:00 in play 80.0 % left, above the re-entry floor of 5 %",
        "2026-11-29 08:40:00 dropped out 1.0 % left, at or below the exit cutoff of 2 %",
    ]


def test_detail_of_an_unknown_connection_is_404(viewer: Client) -> None:
    assert viewer.get("/connections/nobody/").status_code == 404


# --- pools ---------------------------------------------------------------------------------


def test_pools_lists_every_published_auto_id(demo: None, viewer: Client) -> None:
    page = parse(viewer.get("/pools/").content)

    tabs = [tab.by_tag("code")[0].text for tab in page.by_class("tab")]

    assert tabs == [
        "auto/subscription",
        "auto/thrifty",
        "auto/chat:subscription",
        "auto/chat:thrifty",
        "auto/coding:subscription",
        "auto/coding:thrifty",
        "auto/reasoning:subscription",
        "auto/reasoning:thrifty",
    ]


def test_pools_groups_the_thrifty_pool_by_rung_in_order(demo: None, viewer: Client) -> None:
    page = parse(viewer.get("/pools/?auto_id=auto/thrifty").content)

    groups = [
        (group.by_class("rung-name")[0].text, [li.text for li in group.by_tag("li")])
        for group in page.by_class("pool-rung")
    ]

    assert groups == [
        (
            "subscription",
            [
                "claude/claude-sonnet-4-5 via claude-max-1",
                "cursor/cursor-fast via cursor-pro",
            ],
        ),
        ("keyless", ["ollama/llama3.1 via ollama-local"]),
        ("cheap", ["openai/gpt-4o-mini via openai-key"]),
        (
            "premium",
            ["claude/claude-sonnet-4-5 via anthropic-key", "openai/gpt-4o via openai-key"],
        ),
    ]


def test_pools_say_why_the_seat_that_resets_soonest_comes_first(viewer: Client) -> None:
    for connection_id, left, reset_in in (
        ("claude-max-1", 90.0, timedelta(days=6)),
        ("claude-max-2", 40.0, timedelta(hours=19)),
    ):
        make_connection(connection_id)
        make_reading(connection_id, remaining_percent=left, reset_at=NOW + reset_in)
    make_candidate(allowed_connection_ids=("claude-max-1", "claude-max-2"))

    page = parse(viewer.get("/pools/?auto_id=auto/subscription").content)

    entry = page.by_class("pool-entries")[0].by_tag("li")[0]
    assert [link.text for link in entry.by_tag("a")] == ["claude-max-2", "claude-max-1"]
    assert entry.by_class("why-first")[0].text == (
        "claude-max-2 first: resets in 19 h with 40 % left; "
        "claude-max-1 resets in 6 d with 90 % left"
    )


def test_pools_say_nothing_of_order_for_a_single_seat(demo: None, viewer: Client) -> None:
    page = parse(viewer.get("/pools/?auto_id=auto/subscription").content)

    assert page.by_class("pool-entries")
    assert page.by_class("why-first") == []


def test_pools_shows_each_exclusion_with_its_reason_sentence(demo: None, viewer: Client) -> None:
    page = parse(viewer.get("/pools/?auto_id=auto/thrifty").content)

    rows = [" ".join(_cells(row)) for row in page.by_class("excluded")[0].by_tag("tr")[1:]]

    assert rows == [
        "claude-max-2 claude/claude-sonnet-4-5 subscription quota_exhausted "
        "1.5 % left, at or below the exit cutoff of 2 %",
        "codex-plus codex/gpt-5-codex subscription below_reentry "
        "3.5 % left, re-entry needs more than 5 %",
        "groq-key groq/llama-3.3-70b free cooling_down Cooling down until 2026-11-29 12:01:35 UTC",
    ]


def test_pools_of_a_category_composite(demo: None, viewer: Client) -> None:
    page = parse(viewer.get("/pools/?auto_id=auto/reasoning:subscription").content)

    entries = [li.text for li in page.by_class("pool-entries")[0].by_tag("li")]
    assert page.by_class("pool-head")[0].by_tag("h2")[0].text == "auto/reasoning:subscription"
    assert entries == ["claude/claude-sonnet-4-5 via claude-max-1"]


def test_pools_says_an_unpublished_category_is_not_published(demo: None, viewer: Client) -> None:
    page = parse(viewer.get("/pools/?auto_id=auto/vision:thrifty").content)

    assert page.by_id("pool-table").by_class("notice")[0].text == (
        "auto/vision:thrifty is not published: no registered candidate lists its category."
    )
    assert page.by_class("pool-head")[0].by_tag("h2")[0].text == "auto/subscription"


def test_empty_subscription_pool_is_the_intended_answer(viewer: Client) -> None:
    page = parse(viewer.get("/pools/").content)

    assert page.by_class("empty-pool")[0].text.startswith("Empty pool. No plan connection")


# --- settings ------------------------------------------------------------------------------

VALID_SETTINGS = {
    "exit_cutoff_percent": "3",
    "reentry_min_remaining_percent": "8",
    "cheap_budget_usd": "",
    "premium_budget_usd": "0",
    "budget_window": "week",
    "max_state_age_seconds": "240",
    "base_cooldown_seconds": "2",
    "max_cooldown_seconds": "60",
    "cheap_max_input_usd_per_mtok": "0.5",
}


def test_settings_form_has_no_enabled_flag(viewer: Client, operator: Client) -> None:
    page = parse(operator.get("/settings/").content)

    names = [
        element.attrs.get("name")
        for element in page.find_all(lambda e: e.tag in ("input", "select", "textarea"))
    ]
    assert "enabled" not in names
    assert {name for name in names if name and not name.startswith("csrf")} == set(VALID_SETTINGS)


def test_settings_update_saves_every_field_and_audits_it(operator: Client) -> None:
    response = operator.post(
        "/settings/update/", VALID_SETTINGS, headers=htmx_headers("settings-form")
    )

    assert response.status_code == 200
    row = LadderSettings.objects.get(pk=1)
    assert (
        row.exit_cutoff_percent,
        row.reentry_min_remaining_percent,
        row.cheap_budget_usd,
        row.premium_budget_usd,
        row.budget_window,
        row.max_state_age_seconds,
        row.base_cooldown_seconds,
        row.max_cooldown_seconds,
        row.cheap_max_input_usd_per_mtok,
        row.updated_by,
    ) == (3.0, 8.0, None, Decimal(0), "week", 240, 2.0, 60.0, Decimal("0.5"), "olga")
    assert AuditEntry.objects.filter(target_type="settings", actor="olga").count() == 1
    assert parse(response.content).by_class("notice")[0].text == "Settings saved."


def test_settings_errors_are_listed_by_field_and_nothing_changes(operator: Client) -> None:
    before = list(LadderSettings.objects.values())
    bad = {
        **VALID_SETTINGS,
        "exit_cutoff_percent": "101",
        "base_cooldown_seconds": "0",
        "cheap_budget_usd": "-1",
    }

    response = operator.post("/settings/update/", bad, headers=htmx_headers("settings-form"))

    assert response.status_code == 422
    summary = [li.text for li in parse(response.content).by_class("error-summary")[0].by_tag("li")]
    assert summary == [
        "Exit cutoff (%): Ensure this value is less than or equal to 100.",
        "Cheap rung budget (USD): Ensure this value is greater than or equal to 0.",
        "Cooldown base (s): Must be greater than 0.",
    ]
    assert list(LadderSettings.objects.values()) == before


def _summary(response: Any) -> list[str]:
    return [li.text for li in parse(response.content).by_class("error-summary")[0].by_tag("li")]


def test_settings_form_refuses_what_the_api_could_not_answer(operator: Client) -> None:
    before = list(LadderSettings.objects.values())
    # What the old form stored, after which GET /api/v1/settings/ladder answered 500.
    bad = {
        **VALID_SETTINGS,
        "max_cooldown_seconds": "100000",
        "base_cooldown_seconds": "172800",
        "max_state_age_seconds": "40000000",
        "cheap_budget_usd": "1000000.01",
    }

    response = operator.post("/settings/update/", bad, headers=htmx_headers("settings-form"))

    assert response.status_code == 422
    assert _summary(response) == [
        "Cheap rung budget (USD): Ensure this value is less than or equal to 1000000.",
        "Max reading age (s): Ensure this value is less than or equal to 86400.",
        "Cooldown base (s): Ensure this value is less than or equal to 86400.",
        "Cooldown cap (s): Ensure this value is less than or equal to 86400.",
    ]
    assert list(LadderSettings.objects.values()) == before
    assert not AuditEntry.objects.exists()


def test_settings_form_refuses_a_reentry_floor_below_the_exit_cutoff_naming_both(
    operator: Client,
) -> None:
    before = list(LadderSettings.objects.values())
    bad = {**VALID_SETTINGS, "exit_cutoff_percent": "10", "reentry_min_remaining_percent": "9"}

    response = operator.post("/settings/update/", bad, headers=htmx_headers("settings-form"))

    assert response.status_code == 422
    rule = (
        "The re-entry floor (%) must be at least the exit cutoff (%): a connection that drops "
        "out at the cutoff comes back only above the floor."
    )
    assert _summary(response) == [f"Exit cutoff (%): {rule}", f"Re-entry floor (%): {rule}"]
    assert list(LadderSettings.objects.values()) == before


def test_settings_page_shows_a_stored_out_of_range_row_as_applied_with_a_warning(
    operator: Client,
) -> None:
    LadderSettings.objects.filter(pk=1).update(
        max_cooldown_seconds=100_000.0, max_state_age_seconds=40_000_000
    )

    page = parse(operator.get("/settings/").content)

    warning = page.by_class("notice-warning")[0].text
    assert "2 values outside the rules (max_state_age_seconds, max_cooldown_seconds)" in warning
    values = {
        e.attrs["name"]: e.attrs.get("value")
        for e in page.find_all(lambda e: e.tag == "input" and "name" in e.attrs)
    }
    assert (values["max_state_age_seconds"], values["max_cooldown_seconds"]) == ("86400", "86400.0")


def test_settings_page_of_a_legal_row_shows_no_out_of_range_warning(operator: Client) -> None:
    page = parse(operator.get("/settings/").content)

    assert page.by_class("notice-warning") == []


def _edges() -> list[Any]:
    """Each bound of each setting, at the edge and one step past it."""
    cases = []
    for name, bound in SETTINGS_BOUNDS.items():
        step = 1 if bound.integer else 0.01
        cases += [
            pytest.param(name, bound.high, True, id=f"{name}-at-high"),
            pytest.param(name, bound.high + step, False, id=f"{name}-above-high"),
            pytest.param(name, bound.low, not bound.low_open, id=f"{name}-at-low"),
            pytest.param(name, bound.low - step, False, id=f"{name}-below-low"),
        ]
    return cases


@pytest.mark.parametrize(("name", "value", "legal"), _edges())
def test_the_form_the_api_and_the_services_apply_one_definition_of_the_bounds(
    client: Client, name: str, value: float, legal: bool
) -> None:
    # Exit 0 and re-entry 100: any percent edge keeps the floor at or above the cutoff.
    base = {**VALID_SETTINGS, "exit_cutoff_percent": "0", "reentry_min_remaining_percent": "100"}
    form = signed_in(client, "olga", "operator").post(
        "/settings/update/", {**base, name: str(value)}, headers=htmx_headers("settings-form")
    )
    body: dict[str, Any] = {
        "exit_cutoff_percent": 0,
        "reentry_min_remaining_percent": 100,
        "rung_budget_usd": {"cheap": None, "premium": 0},
        "budget_window": "week",
        "max_state_age_seconds": 240,
        "base_cooldown_seconds": 2,
        "max_cooldown_seconds": 60,
        "cheap_max_input_usd_per_mtok": 0.5,
    }
    if name.endswith("_budget_usd"):
        body["rung_budget_usd"][name.removesuffix("_budget_usd")] = value
    else:
        body[name] = value
    token = make_token("ops", ApiToken.Scope.OPERATOR)
    put = api("put", "/api/v1/settings/ladder", token, body)
    values = {**SETTINGS_DEFAULTS, name: value}

    assert (form.status_code, put.status_code) == ((200, 200) if legal else (422, 422))
    assert (not settings_problems(values)) is legal


def test_settings_band_marks_the_effective_floor_when_reentry_is_below_the_cutoff(
    viewer: Client,
) -> None:
    LadderSettings.objects.filter(pk=1).update(
        exit_cutoff_percent=4.0, reentry_min_remaining_percent=1.0
    )

    page = parse(viewer.get("/settings/").content)

    band = page.by_class("band")[0]
    assert band.by_tag("title")[0].text == (
        "Exit at or below 4 %, re-entry above 4 % (configured 1 %, raised to the cutoff)"
    )
    assert len(band.by_class("mark-configured")) == 1
    assert "the effective floor is the cutoff, 4 % (no gap)" in page.by_class("band-legend")[0].text


def test_settings_explains_budgets(viewer: Client) -> None:
    page = parse(viewer.get("/settings/").content)

    assert "0 disables the rung outright; an empty budget means no budget" in page.text


def test_settings_shows_values_read_only_to_a_viewer(viewer: Client) -> None:
    page = parse(viewer.get("/settings/").content)

    assert page.by_tag("input") == page.find_all(
        lambda e: e.tag == "input" and e.attrs.get("name") == "csrfmiddlewaretoken"
    )
    facts = page.by_class("facts")[0]
    assert [
        (dt.text, dd.text) for dt, dd in zip(facts.by_tag("dt"), facts.by_tag("dd"), strict=True)
    ][:2] == [
        ("Exit cutoff", "2 %"),
        ("Re-entry floor", "5 %"),
    ]


# --- tokens --------------------------------------------------------------------------------


def test_token_create_shows_the_secret_once(operator: Client) -> None:
    response = operator.post(
        "/tokens/create/",
        {"name": "edge-1", "scope": "gateway"},
        headers=htmx_headers("token-table"),
    )

    secret = parse(response.content).by_id("new-token-secret").text
    token = ApiToken.objects.get()
    assert (response.status_code, token.name, token.scope, token.created_by) == (
        201,
        "edge-1",
        "gateway",
        "olga",
    )
    assert token.secret_hash == hash_secret(secret)
    assert "no-store" in response["Cache-Control"]
    assert secret not in operator.get("/tokens/").content.decode()


def test_token_list_shows_name_scope_prefix_and_state(operator: Client) -> None:
    operator.post("/tokens/create/", {"name": "edge-1", "scope": "operator"})
    token = ApiToken.objects.get()

    row = parse(operator.get("/tokens/").content).by_id(f"token-{token.pk}")

    cells = [cell.text for cell in row.by_tag("td")]
    assert cells[:3] == ["edge-1", "operator", f"{token.prefix}…"]
    assert cells[4:6] == ["never", "live"]


def test_token_revoke_asks_first_then_revokes(operator: Client) -> None:
    operator.post("/tokens/create/", {"name": "edge-1", "scope": "gateway"})
    token = ApiToken.objects.get()

    confirm = parse(operator.get(f"/tokens/?revoke={token.pk}").content)
    assert "Revoke “edge-1”? Gateways using it get 401 at once." in confirm.text
    assert ApiToken.objects.get().revoked_at is None

    response = operator.post(f"/tokens/{token.pk}/revoke/", headers=htmx_headers("token-table"))

    assert response.status_code == 200
    assert ApiToken.objects.get().revoked_at is not None
    assert parse(response.content).by_id(f"token-{token.pk}").by_class("flag-error")[0].text == (
        "revoked"
    )


def test_token_with_an_empty_name_is_refused(operator: Client) -> None:
    response = operator.post("/tokens/create/", {"name": "  ", "scope": "gateway"})

    assert response.status_code == 422
    assert ApiToken.objects.count() == 0


# --- sign in -------------------------------------------------------------------------------


def test_sign_in_with_username_and_password_lands_on_the_overview(client: Client) -> None:
    from tests.worlds import PASSWORD, make_user

    make_user("olga", "operator")

    response = client.post("/accounts/login/", {"username": "olga", "password": PASSWORD})

    assert (response.status_code, response["Location"]) == (302, "/")


def test_sign_out_is_a_post(operator: Client) -> None:
    assert operator.get("/accounts/logout/").status_code == 405

    response = operator.post("/accounts/logout/")

    assert (response.status_code, response["Location"]) == (302, "/accounts/login/")
    assert operator.get("/").status_code == 302


def test_nav_lists_every_page_and_the_user_and_role(viewer: Client) -> None:
    page = parse(viewer.get("/").content)

    nav = [a.text for a in page.by_class("main-nav")[0].by_tag("a")]
    assert nav == [
        "Overview",
        "Connections",
        "Candidates",
        "Pools",
        "Spend",
        "Catalog",
        "Prices",
        "Aliases",
        "What-if report",
        "Settings",
        "Notifications",
        "API tokens",
        "Audit",
    ]
    sections = [group.attrs["aria-labelledby"] for group in page.by_class("nav-group")]
    assert sections == ["nav-routing", "nav-money", "nav-admin"]
    assert page.by_class("who")[0].text == "victor viewer Sign out"


def test_a_connection_never_read_reads_naturally_on_its_page(viewer: Client) -> None:
    make_connection("fresh-1")
    make_candidate(connection_id="fresh-1")

    card = parse(viewer.get("/connections/fresh-1/").content).by_id("hysteresis-card")

    first = card.by_tag("p")[0].text
    assert " ".join(first.split()) == "in play (never read)"
    assert "since: none" not in card.text


def test_readings_never_read_show_as_such(viewer: Client) -> None:
    make_connection("fresh-1")

    row = _row(parse(viewer.get("/connections/").content), "fresh-1")

    assert _cells(row)[3:7] == [
        "never read",
        "no candidate In no pool until a candidate names it. Candidates never read",
        "none",
        "none",
    ]
    assert QuotaReading.objects.count() == 0
    assert Connection.objects.count() == 1
