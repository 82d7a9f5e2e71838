"""The overview leads somewhere: excluded connections named with why, each linking to
its page; rung cards linking into the connections list filtered by rung; counts that say
what they count; one next change, and none foreseen while the readings are stale."""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal
from types import SimpleNamespace
from typing import cast

import pytest
from django.test import Client

from billing.models import BillingCatalogEntry
from ladder import services
from ladder.core import Decision
from ladder.models import LadderSettings
from ladder.web.overview_facts import NextChange, next_change
from ladder.web.presenters import Freshness
from omniroute_admin import dashboard
from tests.ladder.factories import NOW, make_candidate, make_connection
from tests.pages import Element, parse
from tests.worlds import htmx_headers, seed_demo_world, signed_in

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _pinned_now(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(dashboard, "current_time", lambda: NOW)


@pytest.fixture
def viewer(client: Client) -> Client:
    seed_demo_world(NOW, history=False)
    return signed_in(client, "victor", "viewer")


def _pages(viewer: Client) -> list[Element]:
    """The overview as a full page and as its live fragment (the same section)."""
    full = parse(viewer.get("/").content).by_id("ladder-status")
    fragment = parse(viewer.get("/", headers=htmx_headers("ladder-status")).content)
    return [full, fragment.by_id("ladder-status")]


def _links(element: Element) -> list[tuple[str, str | None]]:
    return [(a.text, a.attrs.get("href")) for a in element.by_tag("a")]


def test_each_excluded_connection_is_named_with_why_and_links_to_its_page(
    viewer: Client,
) -> None:
    for page in _pages(viewer):
        excluded = [card.by_class("rung-excluded") for card in page.by_class("rung-card")]

        assert [
            [li.text for li in found[0].by_tag("li")] if found else [] for found in excluded
        ] == [
            [
                "claude-max-2 quota_exhausted 1.5 % left, at or below the exit cutoff of 2 %",
                "codex-plus below_reentry 3.5 % left, re-entry needs more than 5 %",
            ],
            [],
            ["groq-key cooling_down Cooling down until 2026-11-29 12:01:35 UTC"],
            [],
            [],
        ]
        assert _links(excluded[0][0]) == [
            ("claude-max-2", "/connections/claude-max-2/"),
            ("codex-plus", "/connections/codex-plus/"),
        ]


def test_rung_cards_link_into_the_connections_list_filtered_by_rung(viewer: Client) -> None:
    for page in _pages(viewer):
        cards = page.by_class("rung-card")

        assert [_links(card.by_tag("h3")[0]) for card in cards] == [
            [(rung, f"/connections/?rung={rung}")]
            for rung in ("subscription", "keyless", "free", "cheap", "premium")
        ]
        assert [_links(card.by_class("rung-more")[0]) for card in cards] == [
            [(f"Every {rung} connection", f"/connections/?rung={rung}")]
            for rung in ("subscription", "keyless", "free", "cheap", "premium")
        ]


def test_the_rung_link_lists_what_the_card_counts(viewer: Client) -> None:
    page = parse(viewer.get("/connections/?rung=subscription").content)

    listed = [
        row.attrs["data-connection"]
        for row in page.find_all(lambda e: e.tag == "tr" and "data-connection" in e.attrs)
    ]
    # 2 usable in auto/thrifty + 2 excluded on the card: the same four connections.
    assert listed == ["claude-max-1", "claude-max-2", "codex-plus", "cursor-pro"]


def test_counts_say_what_they_count(viewer: Client) -> None:
    for page in _pages(viewer):
        facts = page.by_class("facts")[0]

        assert [dd.text for dd in facts.by_tag("dd")][:2] == [
            "1 plan connection verified for auto/subscription, in 1 pool entry",
            "5 connections usable in auto/thrifty, in 6 pool entries; "
            "first rung with capacity: subscription",
        ]
        assert page.by_class("rung-verified")[0].text == "1 verified for auto/subscription"
        assert "usable in auto/thrifty" in page.by_class("section-title")[0].text


def test_the_next_change_is_the_earliest_known_instant_and_says_what_it_is(
    viewer: Client,
) -> None:
    for page in _pages(viewer):
        # The browser adds each distance: "12:01:35 UTC (in 1 min 35 s): ...".
        assert page.by_class("next-change")[0].text == (
            "12:01:35 UTC: an excluded connection may come back to a pool"
        )
        assert page.by_class("next-reset")[0].text == "12:37:00 UTC"


def test_an_exclusion_ending_at_the_next_reset_says_both(
    viewer: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Past groq-key's cooldown (12:01:35), before the readings go stale (12:02:40).
    monkeypatch.setattr(dashboard, "current_time", lambda: NOW + timedelta(seconds=120))

    for page in _pages(viewer):
        assert page.by_class("next-change")[0].text == (
            "12:37:00 UTC: an excluded connection may come back to a pool and a quota reset"
        )


def test_a_known_reset_is_the_next_change_when_no_exclusion_ends() -> None:
    none = cast(Decision, SimpleNamespace(next_change_at=None))
    health = services.ReadingHealth(4, 4, NOW, NOW + timedelta(minutes=2))
    fresh = Freshness(health, None, NOW + timedelta(minutes=2))

    assert next_change(none, none, fresh) == NextChange(NOW + timedelta(minutes=2), "a quota reset")
    nothing = Freshness(services.ReadingHealth(4, 4, NOW, None), None, None)
    assert next_change(none, none, nothing).what == (
        "none known: no exclusion ends at a known time and no reset is due"
    )


def test_during_an_outage_no_duration_is_foreseen_the_readings_are_stale(
    viewer: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(dashboard, "current_time", lambda: NOW + timedelta(minutes=10))

    for page in _pages(viewer):
        assert page.by_class("next-change")[0].text == (
            "None foreseen while the readings are stale: the next reading decides"
        )
        assert page.by_class("next-reset")[0].text == (
            "unknown: the readings are stale (the last one said 2026-11-29 12:37 UTC)"
        )
        assert page.find_all(lambda e: e.attrs.get("data-relative") == "future") == []
        assert " d " not in page.by_class("facts")[0].text


def test_a_cited_catalog_entry_links_to_its_anchor(viewer: Client) -> None:
    entry = BillingCatalogEntry.objects.get(provider="cursor", auth_type="oauth")
    page = parse(viewer.get("/pools/?auto_id=auto/subscription").content)

    links = page.find_all(
        lambda e: e.tag == "a" and e.attrs.get("href") == f"/catalog/#entry-{entry.pk}"
    )
    assert [a.text for a in links] == [f"catalog entry {entry.pk}"]


def test_a_month_into_an_outage_the_overview_counts_no_days(
    viewer: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(dashboard, "current_time", lambda: NOW + timedelta(days=30))

    for page in _pages(viewer):
        assert page.by_class("next-change")[0].text == (
            "None foreseen while the readings are stale: the next reading decides"
        )
        assert page.by_class("next-reset")[0].text == "none known"


def test_the_overview_leads_with_what_was_paid_and_what_the_plans_saved(viewer: Client) -> None:
    # On top of the demo world's ledger: a plan request of 100,000 tokens in and 30,000
    # out (at 3 and 15 USD per million: 0.75 USD at list price, billed nothing) and a
    # cheap one billed 0.25 USD, both inside this month's window.
    before = services.spend_summary(now=NOW)
    services.record_spend(
        services.SpendInput(
            "lead-plan", "claude-max-1", "claude", "claude-sonnet-4-5", None, 100_000, 30_000
        ),
        now=NOW,
    )
    services.record_spend(
        services.SpendInput(
            "lead-cheap", "openai-key", "openai", "gpt-4o-mini", cost_usd=Decimal("0.25")
        ),
        now=NOW,
    )
    paid = sum((r.spent_usd for r in before.rungs.values()), Decimal(0)) + Decimal("0.25")
    saved = before.saved_usd + Decimal("0.75")

    for page in _pages(viewer):
        assert page.by_id("paid-and-saved").text == (
            f"This month: paid {paid:.2f} USD on the paid rungs, saved {saved:.2f} USD: "
            "the list price of what the plans served."
        )


def test_a_closed_rung_is_said_once_on_its_card_not_beside_each_connection(
    viewer: Client,
) -> None:
    # A second key serving a cheap model, and a cheap budget of 0: the rung is closed.
    LadderSettings.objects.filter(pk=1).update(cheap_budget_usd=Decimal("0"))
    make_connection("openai-key-2", provider="openai", auth_type="apikey")
    make_candidate("openai", "gpt-4o-mini", connection_id="openai-key-2", priority=9)
    services.clear_caches()

    for page in _pages(viewer):
        cheap = page.by_class("rung-cheap")[0]

        assert [p.text for p in cheap.by_class("rung-closed")] == [
            "Closed: rung_disabled The cheap rung's budget is 0 USD: the rung is disabled"
        ]
        assert [li.text for li in cheap.by_class("rung-excluded")[0].by_tag("li")] == [
            "openai-key rung_disabled the rung is closed",
            "openai-key-2 rung_disabled the rung is closed",
        ]
        assert cheap.text.count("the rung is disabled") == 1
        assert page.by_class("rung-closed")[0] is cheap.by_class("rung-closed")[0]
