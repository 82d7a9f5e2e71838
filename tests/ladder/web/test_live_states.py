"""What the live parts declare for the one live region to say (ladder/templatetags/live.py,
static/dashboard.js): states an operator acts on, each with the exact sentence for
arriving in it; counters (paid, saved, usable counts, spend) declare none, so a poll that
only moves them says nothing."""

from __future__ import annotations

import pytest
from django.test import Client

from ladder.models import Candidate
from omniroute_admin import dashboard
from tests.ladder.factories import NOW
from tests.pages import Element, parse
from tests.worlds import seed_demo_world, signed_in

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _world(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(dashboard, "current_time", lambda: NOW)
    seed_demo_world(NOW, history=False)


def _declared(page: Element, region: str) -> list[tuple[str | None, str | None, str | None]]:
    return [
        (e.attrs["data-live-key"], e.attrs["data-live-state"], e.attrs["data-live-say"])
        for e in page.by_id(region).iter()
        if "data-live-key" in e.attrs
    ]


def test_the_overview_declares_each_pool_and_rung_and_no_counter(client: Client) -> None:
    page = parse(signed_in(client, "vera", "viewer").get("/").content)

    assert _declared(page, "ladder-status") == [
        ("rung subscription", "usable", "The subscription rung has a usable connection again."),
        ("rung keyless", "usable", "The keyless rung has a usable connection again."),
        ("rung free", "none", "The free rung has no usable connection."),
        ("rung cheap", "usable", "The cheap rung has a usable connection again."),
        ("rung premium", "usable", "The premium rung has a usable connection again."),
        ("pool auto/subscription", "serving", "auto/subscription serves again."),
        ("pool auto/thrifty", "serving", "auto/thrifty serves again."),
    ]


def test_the_pools_page_declares_each_pool_and_each_pair_of_the_one_shown(
    client: Client,
) -> None:
    page = parse(
        signed_in(client, "vera", "viewer").get("/pools/?auto_id=auto/subscription").content
    )

    declared = _declared(page, "pool-table")
    pools = [d for d in declared if d[0].startswith("pool ")]
    members = [d for d in declared if d[0].startswith("member ")]
    assert pools[:3] == [
        ("pool auto/subscription", "serving", "auto/subscription serves again."),
        ("pool auto/thrifty", "serving", "auto/thrifty serves again."),
        ("pool auto/chat:subscription", "empty", "auto/chat:subscription is empty."),
    ]
    assert len(pools) == 8
    # Per (candidate, connection) pair, entries then exclusions; the sentence names the
    # connection only, so a key under two models is said once.
    assert members[:2] == [
        (
            "member auto/subscription claude/claude-sonnet-4-5 claude-max-1",
            "in",
            "claude-max-1 is back in auto/subscription.",
        ),
        (
            "member auto/subscription claude/claude-sonnet-4-5 claude-max-2",
            "out",
            "claude-max-2 left auto/subscription.",
        ),
    ]
    assert members[-2:] == [
        (
            "member auto/subscription openai/gpt-4o-mini openai-key",
            "out",
            "openai-key left auto/subscription.",
        ),
        (
            "member auto/subscription openai/gpt-4o openai-key",
            "out",
            "openai-key left auto/subscription.",
        ),
    ]


def test_the_candidates_matrix_declares_each_cell(client: Client) -> None:
    page = parse(signed_in(client, "vera", "viewer").get("/candidates/").content)

    declared = _declared(page, "candidates-table")
    mini = Candidate.objects.get(model="gpt-4o-mini").pk
    name = f"openai/gpt-4o-mini #{mini}"
    assert [d for d in declared if d[0].startswith(f"#{mini} ")][:2] == [
        (
            f"#{mini} auto/subscription",
            "out by design",
            f"{name} is now out of auto/subscription by design.",
        ),
        (f"#{mini} auto/thrifty", "in", f"{name} is now in auto/thrifty."),
    ]
    # A cell of a pool the candidate's categories leave it out of declares nothing: it
    # cannot change while the candidate stays as it is (20 of 56 cells in the demo world).
    assert len(declared) == 36
