"""The candidates page as a matrix, on a hand-built world: each candidate against each
published auto id says in, out by design (nothing spelled out) or out with what went
wrong, and a paid rung closed by its budget is said once, above the table, never in a
cell."""

from __future__ import annotations

from decimal import Decimal

import pytest
from django.test import Client

from billing import services as billing_services
from ladder import services
from ladder.models import Candidate, LadderSettings
from omniroute_admin import dashboard
from tests.billing.factories import make_catalog_entry
from tests.ladder.factories import NOW, make_candidate, make_connection, make_reading
from tests.pages import Element, parse
from tests.worlds import signed_in

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _pinned_now(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(dashboard, "current_time", lambda: NOW)


@pytest.fixture
def world() -> dict[str, Candidate]:
    """Two Claude plan logins (60 % left, and 1 %: at the exit cutoff of 2 %), a metered
    OpenAI key whose cheap rung has spent 2.50 USD of a 2 USD month budget, and four
    candidates: one allowlisting both plans and one pinned to the spent plan (both in
    category coding), a cheap and a premium model on the key (the premium one in coding)."""
    LadderSettings.objects.filter(pk=1).update(cheap_budget_usd=Decimal("2"), budget_window="month")
    make_catalog_entry("openai", "apikey", "metered", "meters-to-paid", "API keys bill per token.")
    for model, price_in, price_out in (("gpt-4o-mini", "0.15", "0.6"), ("gpt-4o", "2.5", "10")):
        billing_services.upsert_price(
            billing_services.PriceInput(
                "openai", model, Decimal(price_in), Decimal(price_out), None
            ),
            actor="test",
        )
    make_connection("plan-a")
    make_connection("plan-b")
    make_connection("key", provider="openai", auth_type="apikey")
    make_reading("plan-a", remaining_percent=60.0)
    make_reading("plan-b", remaining_percent=1.0)
    services.record_spend(
        services.SpendInput("spent", "key", "openai", "gpt-4o-mini", Decimal("2.5")), now=NOW
    )
    return {
        "both": make_candidate(allowed_connection_ids=("plan-a", "plan-b"), categories=("coding",)),
        "spent": make_candidate(
            model="claude-opus-4", connection_id="plan-b", categories=("coding",), priority=1
        ),
        "cheap": make_candidate("openai", "gpt-4o-mini", connection_id="key", priority=2),
        "premium": make_candidate(
            "openai", "gpt-4o", connection_id="key", categories=("coding",), priority=3
        ),
    }


def _cells(page: Element, candidate: Candidate) -> list[str]:
    """The row's pool cells, in the order of the columns."""
    return [cell.text for cell in page.by_id(f"candidate-{candidate.pk}").by_class("cell")]


EXHAUSTED = "plan-b subscription: quota_exhausted 1.0 % left, at or below the exit cutoff of 2 %"


def test_each_cell_says_in_out_by_design_or_out_with_only_the_unexpected_spelled_out(
    world: dict[str, Candidate], client: Client
) -> None:
    page = parse(signed_in(client, "vera", "viewer").get("/candidates/").content)

    table = page.by_class("matrix")[0]
    assert table.by_tag("caption")[0].text.startswith("Each candidate against each published pool")
    columns = [th for th in table.by_tag("th") if th.attrs.get("scope") == "col"]
    assert [th.text for th in columns][4:] == [
        "auto/subscription",
        "auto/thrifty",
        "auto/coding:subscription",
        "auto/coding:thrifty",
    ]
    rows = [th.text for th in table.by_tag("th") if th.attrs.get("scope") == "row"]
    assert rows == [
        f"claude/claude-sonnet-4-5 #{world['both'].pk}",
        f"claude/claude-opus-4 #{world['spent'].pk}",
        f"openai/gpt-4o-mini #{world['cheap'].pk}",
        f"openai/gpt-4o #{world['premium'].pk}",
    ]
    # In through the plan left, the spent one spelled out: it is not serving. The coding
    # pools say the same by reference, not again.
    assert _cells(page, world["both"]) == [
        f"in subscription via plan-a {EXHAUSTED}",
        f"in subscription via plan-a {EXHAUSTED}",
        "in subscription as in auto/subscription",
        "in subscription as in auto/thrifty",
    ]
    assert _cells(page, world["spent"]) == [
        f"out {EXHAUSTED}",
        f"out {EXHAUSTED}",
        "out as in auto/subscription",
        "out as in auto/thrifty",
    ]
    # A metered key is out of auto/subscription by design; the closed cheap rung is named,
    # its cause said once above the table.
    assert _cells(page, world["cheap"]) == [
        "out by design metered",
        "out cheap rung closed",
        "out by design not coding",
        "out by design not coding",
    ]
    assert _cells(page, world["premium"]) == [
        "out by design metered",
        "in premium",
        "out by design metered",
        "in premium",
    ]
    assert [note.text for note in page.by_class("rung-note")] == [
        "cheap rung closed for every candidate on it, in every pool: budget_exhausted "
        "The cheap rung spent 2.50 USD of its 2.00 USD month budget of "
        "2026-11-01 to 2026-11-30 UTC"
    ]
    closed = page.find_all(lambda e: e.tag == "a" and e.text == "cheap rung closed")
    assert [a.attrs["href"] for a in closed] == ["#rung-cheap"]
    assert page.by_id("rung-cheap").attrs["class"] == "rung-note"
    assert page.text.count("The cheap rung spent") == 1


def test_without_a_closed_rung_there_is_no_rung_note(
    world: dict[str, Candidate], client: Client
) -> None:
    LadderSettings.objects.filter(pk=1).update(cheap_budget_usd=Decimal("5"))
    services.clear_caches()
    page = parse(signed_in(client, "vera", "viewer").get("/candidates/").content)

    assert page.by_class("rung-note") == []
    assert _cells(page, world["cheap"])[:2] == ["out by design metered", "in cheap"]
