"""A pool decision as the gateway keeps it, and the cache rules (spec/api.md, "Caching a
decision in the gateway"). Pure: the caller passes `now` (epoch seconds)."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

_MAX_AGE = re.compile(r"max-age=(\d+)")


class OmniRouteError(Exception):
    """The control plane answered something the client cannot use."""


class ControlPlaneUnavailable(OmniRouteError):
    """The control plane is unreachable and no decision may be served without it
    (subscription fails closed; thrifty only within the grace period)."""


class TokenRejected(OmniRouteError):
    """The control plane answered 401/403: the gateway token is revoked, unknown or
    lacks the gateway scope. Not a fail mode: nothing is served until it is fixed."""


class NotFound(OmniRouteError):
    """404 from the control plane (an unknown auto id, tier or category)."""


def parse_time(value: str | None) -> float | None:
    """An ISO 8601 time of the API as epoch seconds."""
    if not value:
        return None
    return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()


def max_age(cache_control: str | None) -> float | None:
    match = _MAX_AGE.search(cache_control or "")
    return float(match.group(1)) if match else None


def is_thrifty(auto_id: str) -> bool:
    return auto_id == "auto/thrifty" or auto_id.endswith(":thrifty")


def pool_key(auto_id: str, candidates: list[dict[str, Any]] | None) -> str:
    if candidates is None:
        return auto_id
    return auto_id + "\n" + json.dumps(candidates, sort_keys=True, separators=(",", ":"))


@dataclass(frozen=True)
class Decision:
    """One pool answer. `candidates` is the ranked pool (dicts of the API);
    `stale` is True when it is served from the last good answer while the control plane
    is unreachable (thrifty only)."""

    body: dict[str, Any]
    etag: str | None
    stale: bool = False
    # When the request that fetched it was sent (epoch seconds): spend acknowledged
    # before then is in its `budget_left_usd`.
    sent_at: float = field(default=0.0, compare=False)

    @property
    def auto_id(self) -> str:
        return str(self.body.get("auto_id", ""))

    @property
    def candidates(self) -> list[dict[str, Any]]:
        return list(self.body.get("candidates") or [])

    @property
    def excluded(self) -> list[dict[str, Any]]:
        return list(self.body.get("excluded") or [])

    @property
    def budget_left_usd(self) -> dict[str, float | None]:
        """What each budgeted rung still allowed when the decision was computed (None:
        no budget, or a server that predates the field)."""
        left = self.body.get("budget_left_usd") or {}
        return {rung: left.get(rung) for rung in ("cheap", "premium")}

    @property
    def next_change_at(self) -> float | None:
        return parse_time(self.body.get("next_change_at"))

    @property
    def valid_until(self) -> float | None:
        return parse_time(self.body.get("valid_until"))

    def retry_after(self, now: float) -> float | None:
        """Seconds until `next_change_at` (never negative), None when nothing is known."""
        at = self.next_change_at
        return None if at is None else max(0.0, at - now)


@dataclass
class Entry:
    """A kept decision: fresh until `fresh_until` (epoch seconds) unless invalidated."""

    decision: Decision
    fresh_until: float
    fetched_at: float
    generation: int
    extra: dict[str, Any] = field(default_factory=dict)


def freshness(
    *,
    now: float,
    status: int,
    cache_control: str | None,
    body_valid_until: float | None,
    feed_live: bool,
    revalidate_seconds: float,
) -> float:
    """Until when a decision just received (200) or confirmed (304) may be served.

    A 200 carries its exact `valid_until`; a 304 only `max-age` (floored to the second:
    0 when less than a second is left, or when nothing expires). Without a live change
    feed, nobody tells the client of other gateways' writes, so it revalidates at least
    every `revalidate_seconds`."""
    if status == 200:
        until = body_valid_until if body_valid_until is not None else float("inf")
    else:
        age = max_age(cache_control) or 0.0
        if age > 0:
            until = now + age
        elif body_valid_until is None:
            until = float("inf")
        else:
            # Under a second left (or just passed): serve it briefly, then ask again.
            until = max(body_valid_until, now + min(0.25, revalidate_seconds))
    if not feed_live:
        until = min(until, now + revalidate_seconds)
    return until
