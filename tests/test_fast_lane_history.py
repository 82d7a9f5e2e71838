"""The fast lane never answers the pool history (`/api/v1/pools/<id>/history`), even with
the pool's decision cached, and never learns a history page's headers."""

from __future__ import annotations

import json

import pytest

from omniroute_admin.fast_lane import PoolFastLane
from tests import test_fast_lane
from tests.ladder.factories import make_candidate
from tests.test_fast_lane import POOL, CountingDjango, call, served

pytestmark = pytest.mark.django_db

# The fast lane's fixtures (django_app, gateway, lane, plan), shared with its tests.
django_app = test_fast_lane.django_app
gateway = test_fast_lane.gateway
lane = test_fast_lane.lane
plan = test_fast_lane.plan


@pytest.mark.usefixtures("plan")
@pytest.mark.parametrize("suffix", ["/history", "/history/", "/history?limit=1"])
def test_a_warm_lane_hands_the_history_to_django(
    lane: PoolFastLane, django_app: CountingDjango, gateway: str, suffix: str
) -> None:
    call(lane, token=gateway)
    call(lane, token=gateway)
    assert served(django_app, 1) == "lane"  # warm: the pool is the lane's
    before = django_app.calls

    history = call(lane, POOL + suffix, token=gateway)

    assert served(django_app, before) == "django"
    if suffix != "/history/":
        assert history.code == 200
        rows = json.loads(history.body)
        assert [(r["change"], r["connection_id"]) for r in rows] == [("entered", "claude-max-1")]


@pytest.mark.usefixtures("plan")
def test_a_history_pages_headers_are_never_replayed_on_a_pool_answer(
    lane: PoolFastLane, django_app: CountingDjango, gateway: str
) -> None:
    make_candidate(model="claude-opus-4-1", connection_id="claude-max-1")
    call(lane, token=gateway)  # records two entries; the lane learns the pool's headers
    fresh = PoolFastLane(django_app)
    # A history page with a next page is the first 200 this lane sees for the shape.
    first_page = call(fresh, POOL + "/history?limit=1", token=gateway)
    assert first_page.code == 200
    assert first_page.header("Link") is not None
    call(fresh, token=gateway)  # Django's (the lane has no decision of its own yet)

    before = django_app.calls
    pool = call(fresh, token=gateway)

    assert pool.code == 200
    assert pool.header("Link") is None
    assert pool.header("X-Next-Cursor") is None
    assert json.loads(pool.body)["auto_id"] == "auto/subscription"
    assert served(django_app, before) == "lane"
