"""The demo world shows the promise within minutes: every plan runs out at once from
about minute 8 to minute 10 of every ten (UTC), `auto/subscription` is then empty with
each plan's reason and the reset as its next change, and every plan is back after the
reset (ladder/management/commands/seed_demo.py)."""

from __future__ import annotations

import io
from datetime import UTC, datetime, timedelta

import pytest
from django.core.management import call_command

from ladder import services
from ladder.core.auto_ids import parse_auto_id
from ladder.services import polling

pytestmark = pytest.mark.django_db

PLANS = ("claude-max-1", "claude-max-2", "codex-plus", "cursor-pro")
# cursor-pro's overage is unknown (it could bill past the plan): never in the pool.
SUBSCRIPTION_PLANS = {"claude-max-1", "claude-max-2", "codex-plus"}
# A window start (on the tens) a day ahead: seeding may store readings at the real now,
# and a reading never moves back in time, so the test's instants come after them.
_TOMORROW = datetime.now(UTC) + timedelta(days=1)
CYCLE_START = _TOMORROW.replace(minute=_TOMORROW.minute // 10 * 10, second=0, microsecond=0)


def _pool_at(now: datetime) -> tuple[set[str], set[tuple[str, str]], datetime | None]:
    for connection_id in PLANS:
        polling.refresh_quota(connection_id, now=now)
    decision = services.decide_registered(parse_auto_id("auto/subscription"), now=now)
    served = {c.connection_id for c in decision.candidates if c.connection_id} | {
        cid for c in decision.candidates for cid in (c.allowed_connection_ids or ())
    }
    excluded = {(e.connection_id, e.reason.value) for e in decision.excluded}
    return served, excluded, decision.next_change_at


@pytest.fixture
def demo() -> None:
    call_command("seed_demo", stdout=io.StringIO())


def test_every_plan_is_out_at_once_from_minute_8_and_the_pool_waits_for_the_reset(
    demo: None,
) -> None:
    served, excluded, next_change_at = _pool_at(CYCLE_START + timedelta(minutes=8, seconds=30))

    assert served == set()
    exhausted = {cid for cid, reason in excluded if reason == "quota_exhausted"}
    assert exhausted == SUBSCRIPTION_PLANS
    assert next_change_at is not None
    assert CYCLE_START + timedelta(minutes=10) <= next_change_at
    assert next_change_at <= CYCLE_START + timedelta(minutes=10, seconds=5)


def test_after_the_reset_the_plans_serve_again(demo: None) -> None:
    served, _, _ = _pool_at(CYCLE_START + timedelta(minutes=10, seconds=30))

    assert served == SUBSCRIPTION_PLANS


def test_before_minute_6_every_plan_serves(demo: None) -> None:
    served, excluded, _ = _pool_at(CYCLE_START + timedelta(minutes=3))

    assert served == SUBSCRIPTION_PLANS
    assert [cid for cid, reason in excluded if reason == "quota_exhausted"] == []
