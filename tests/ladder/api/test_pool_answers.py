"""Decisions a gateway can keep (api.md, "Caching a decision in the gateway"): every pool
answer carries `valid_until`, an `ETag` of what it says and `Cache-Control` until
`valid_until`; `If-None-Match` of the current tag gets a 304 with no body. The fast lane's
side of it is in tests/test_fast_lane.py."""

from __future__ import annotations

import hashlib
import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.test import Client
from django.utils import timezone

from ladder import services
from ladder.api import pool_answers
from ladder.api.pool_answers import cache_control, decision_out, decision_tag, tag_matches
from ladder.core import LadderConfig, decide, parse_auto_id
from ladder.models import ApiToken
from tests.ladder.factories import make_candidate, make_connection, make_reading, make_token

NOW = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)
POOL = "/api/v1/pools/auto/subscription"
THRIFTY = "/api/v1/pools/auto/thrifty"


# --- the pure parts: Cache-Control, the tag, If-None-Match ---------------------------------


@pytest.mark.parametrize(
    ("valid_until", "expected"),
    [
        (NOW + timedelta(seconds=90, milliseconds=900), "private, max-age=90"),
        (NOW + timedelta(seconds=60), "private, max-age=60"),
        (NOW + timedelta(days=2, seconds=5), "private, max-age=172805"),
        (NOW + timedelta(milliseconds=500), "private, max-age=0"),
        (NOW, "private, max-age=0"),
        (NOW - timedelta(seconds=30), "private, max-age=0"),
        (None, "private, max-age=0"),
    ],
)
def test_cache_control_is_the_whole_seconds_left_floored_never_negative(
    valid_until: datetime | None, expected: str
) -> None:
    assert cache_control(valid_until, NOW) == expected


def test_the_tag_is_a_weak_digest_of_the_canonical_json_without_time_or_sentences() -> None:
    out: dict[str, Any] = {
        "auto_id": "auto/thrifty",
        "grouping": "thrifty",
        "category": None,
        "fail_mode": "open",
        "computed_at": NOW,
        "candidates": [],
        "excluded": [
            {
                "provider": "p",
                "model": "m",
                "connection_id": "k",
                "rung": "premium",
                "reason": "cooling_down",
                "detail": "Cooling down until 12:01:00Z (60 s from now)",
            }
        ],
        "next_change_at": NOW + timedelta(minutes=1),
        "valid_until": NOW + timedelta(minutes=1),
    }
    later = {
        **out,
        "computed_at": NOW + timedelta(seconds=20),
        "valid_until": None,
        "excluded": [{**out["excluded"][0], "detail": "... (40 s from now)"}],
    }

    assert decision_tag(out) == 'W/"c09c35d14fc8f3eefe21fc5243dbee24"'
    assert decision_tag(later) == decision_tag(out)
    assert decision_tag({**out, "next_change_at": None}) != decision_tag(out)
    assert decision_tag({**out, "auto_id": "auto/subscription"}) != decision_tag(out)


@pytest.mark.parametrize(
    ("header", "matches"),
    [
        ('W/"abc"', True),
        ('"abc"', True),
        ("*", True),
        (" * ", True),
        ('"old", W/"abc"', True),
        ('W/"old",W/"abc" ', True),
        ('W/"old"', False),
        ("abc", False),
        ('W/"abcd"', False),
        ("", False),
        (",,", False),
    ],
)
def test_if_none_match_compares_weakly_lists_and_star(header: str, matches: bool) -> None:
    assert tag_matches(header, 'W/"abc"') is matches


def test_the_core_decision_carries_valid_until() -> None:
    auto_id = parse_auto_id("auto/thrifty")

    decision = decide(auto_id, [], {}, {}, {}, LadderConfig(), NOW)

    assert decision.valid_until is None
    assert decision_out(decision)["valid_until"] is None


# --- the endpoint ---------------------------------------------------------------------------


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> list[datetime]:
    """The server's clock, set by the test (the endpoint and the services read
    django.utils.timezone.now)."""
    current = [NOW]
    monkeypatch.setattr(timezone, "now", lambda: current[0])
    return current


@pytest.fixture
def gateway(db: None) -> str:
    return make_token("gw", ApiToken.Scope.GATEWAY)


@pytest.fixture
def plan(db: None, clock: list[datetime]) -> None:
    """A plan login read at NOW with 60 % left and a reset 90.5 s later, pinned by one
    candidate: the decision is valid until the reset."""
    make_connection("claude-max-1")
    make_reading(
        "claude-max-1",
        now=NOW,
        checked_at=NOW,
        remaining_percent=60.0,
        reset_at=NOW + timedelta(seconds=90, milliseconds=500),
    )
    make_candidate(connection_id="claude-max-1")


def get(token: str, path: str = POOL, **headers: Any) -> Any:
    return Client().get(path, HTTP_AUTHORIZATION=f"Bearer {token}", **headers)


def post(token: str, body: dict[str, Any], **headers: Any) -> Any:
    return Client().post(
        THRIFTY,
        json.dumps(body),
        content_type="application/json",
        HTTP_AUTHORIZATION=f"Bearer {token}",
        **headers,
    )


def untagged(body: dict[str, Any]) -> dict[str, Any]:
    """An answer without what its tag leaves out (computed_at, valid_until, sentences)."""
    content = {k: v for k, v in body.items() if k not in ("computed_at", "valid_until")}
    content["excluded"] = [{k: v for k, v in e.items() if k != "detail"} for e in body["excluded"]]
    return content


def expected_tag(body: dict[str, Any]) -> str:
    canonical = json.dumps(untagged(body), sort_keys=True, separators=(",", ":"))
    return f'W/"{hashlib.sha256(canonical.encode()).hexdigest()[:32]}"'


OWN_POOL = {
    "candidates": [
        {
            "id": 7,
            "provider": "claude",
            "model": "claude-sonnet-4-5",
            "connection_id": "claude-max-1",
        }
    ]
}


@pytest.mark.usefixtures("plan")
def test_a_get_carries_valid_until_its_tag_and_cache_control(gateway: str) -> None:
    response = get(gateway)

    body = response.json()
    assert response.status_code == 200
    assert body["computed_at"] == "2026-11-29T12:00:00Z"
    assert body["valid_until"] == "2026-11-29T12:01:30.500Z"
    assert response["ETag"] == expected_tag(body)
    assert response["Cache-Control"] == "private, max-age=90"


@pytest.mark.usefixtures("plan")
def test_a_post_carries_valid_until_its_tag_and_cache_control(
    gateway: str, clock: list[datetime]
) -> None:
    clock[0] = NOW + timedelta(seconds=30)

    response = post(gateway, OWN_POOL)

    body = response.json()
    assert response.status_code == 200
    assert body["valid_until"] == "2026-11-29T12:01:30.500Z"
    assert [c["id"] for c in body["candidates"]] == [7]
    assert response["ETag"] == expected_tag(body)
    assert response["Cache-Control"] == "private, max-age=60"


def test_a_decision_with_nothing_time_dependent_has_max_age_0(
    gateway: str, clock: list[datetime]
) -> None:
    response = get(gateway, THRIFTY)

    assert response.json()["valid_until"] is None
    assert response["Cache-Control"] == "private, max-age=0"


@pytest.mark.usefixtures("plan")
@pytest.mark.parametrize("form", ["{tag}", '"old", {tag}', "{strong}", "*"])
def test_if_none_match_of_the_current_tag_is_a_304_without_body(gateway: str, form: str) -> None:
    tag = get(gateway)["ETag"]
    header = form.format(tag=tag, strong=tag.removeprefix("W/"))

    response = get(gateway, HTTP_IF_NONE_MATCH=header)

    assert response.status_code == 304
    assert response.content == b""
    assert response["ETag"] == tag
    assert response["Cache-Control"] == "private, max-age=90"
    assert "Content-Type" not in response


@pytest.mark.usefixtures("plan")
def test_a_post_with_if_none_match_of_its_tag_is_a_304(gateway: str) -> None:
    tag = post(gateway, OWN_POOL)["ETag"]

    response = post(gateway, OWN_POOL, HTTP_IF_NONE_MATCH=tag)
    other = post(gateway, {"candidates": []}, HTTP_IF_NONE_MATCH=tag)

    assert (response.status_code, response.content, response["ETag"]) == (304, b"", tag)
    assert other.status_code == 200
    assert other["ETag"] != tag


@pytest.mark.usefixtures("plan")
def test_a_tag_that_is_not_current_gets_the_full_answer(gateway: str) -> None:
    first = get(gateway)

    response = get(gateway, HTTP_IF_NONE_MATCH='W/"0123456789abcdef0123456789abcdef"')

    assert response.status_code == 200
    assert response.content == first.content
    assert response["ETag"] == first["ETag"]


@pytest.mark.usefixtures("plan")
def test_the_tag_survives_a_recomputation_from_the_same_inputs_at_another_instant(
    gateway: str, clock: list[datetime]
) -> None:
    first = get(gateway)
    services.clear_caches()
    pool_answers._RENDERED.clear()
    clock[0] = NOW + timedelta(seconds=20)

    again = get(gateway)

    assert again.json()["computed_at"] == "2026-11-29T12:00:20Z"
    assert again.content != first.content
    assert again["ETag"] == first["ETag"]
    assert again["Cache-Control"] == "private, max-age=70"
    assert get(gateway, HTTP_IF_NONE_MATCH=first["ETag"]).status_code == 304


def test_the_tag_ignores_the_seconds_counted_in_a_cooldowns_sentence(
    gateway: str, clock: list[datetime]
) -> None:
    make_connection("claude-api", provider="claude", auth_type="apikey")
    services.apply_event("claude-api", kind="rate_limited", retry_after_seconds=60, now=NOW)
    make_candidate(connection_id="claude-api")
    first = get(gateway, THRIFTY)
    services.clear_caches()
    clock[0] = NOW + timedelta(seconds=20)

    again = get(gateway, THRIFTY)

    assert [e["detail"] for e in first.json()["excluded"]] == [
        "Cooling down until 2026-11-29 12:01:00 UTC (60 s from now)"
    ]
    assert [e["detail"] for e in again.json()["excluded"]] == [
        "Cooling down until 2026-11-29 12:01:00 UTC (40 s from now)"
    ]
    assert again["ETag"] == first["ETag"]
    assert (first["Cache-Control"], again["Cache-Control"]) == (
        "private, max-age=60",
        "private, max-age=40",
    )


@pytest.mark.usefixtures("plan")
def test_the_tag_is_the_same_after_valid_until_when_the_content_is(
    gateway: str, clock: list[datetime]
) -> None:
    # Thrifty admits a plan login whose reset has passed: past valid_until the pool is
    # the same, and so is the tag.
    first = get(gateway, THRIFTY)
    clock[0] = NOW + timedelta(seconds=91)

    again = get(gateway, THRIFTY)

    assert untagged(again.json()) == untagged(first.json())
    assert again.json()["valid_until"] == "2026-11-29T12:03:00.000Z"
    assert again["ETag"] == first["ETag"]
    assert again["Cache-Control"] == "private, max-age=89"


@pytest.mark.usefixtures("plan")
def test_a_write_that_changes_the_decision_changes_the_tag(gateway: str) -> None:
    before = get(gateway)
    make_reading("claude-max-1", now=NOW, checked_at=NOW, remaining_percent=1.0)

    after = get(gateway, HTTP_IF_NONE_MATCH=before["ETag"])

    assert after.status_code == 200
    assert after.json()["candidates"] == []
    assert [e["reason"] for e in after.json()["excluded"]] == ["quota_exhausted"]
    assert after["ETag"] == expected_tag(after.json())
    assert after["ETag"] != before["ETag"]


@pytest.mark.usefixtures("plan")
def test_past_valid_until_a_changed_decision_has_a_new_tag(
    gateway: str, clock: list[datetime]
) -> None:
    before = get(gateway)
    clock[0] = NOW + timedelta(seconds=91)

    after = get(gateway, HTTP_IF_NONE_MATCH=before["ETag"])

    assert after.status_code == 200
    assert [e["reason"] for e in after.json()["excluded"]] == ["reset_passed"]
    assert after["ETag"] != before["ETag"]
