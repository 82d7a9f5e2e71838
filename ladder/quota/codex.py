"""Codex (ChatGPT plan) usage: ``GET /backend-api/wham/usage``.

Credential: the ChatGPT OAuth access token, bare, or
``{"access_token": "...", "account_id": "..."}``; ``account_id`` (optional) is sent as
``ChatGPT-Account-Id``, which selects the workspace for a login that belongs to several.

Payload: ``rate_limit.primary_window`` and ``rate_limit.secondary_window`` (either may be
null) with ``used_percent``, ``reset_at`` (epoch seconds) or ``reset_after_seconds``
(relative to now) and ``limit_window_seconds``; ``rate_limit.limit_reached`` true means
exhausted whatever the percentages say. ``additional_rate_limits[]`` (``{limit_name,
metered_feature, rate_limit: {primary_window, secondary_window, limit_reached}}``) are
windows scoped by ``limit_name`` (spec/ladder.md, "Windows scoped to a model"); a scoped
limit reached reads as nothing left in its windows.

Billing evidence: ``credits.has_credits: true`` or ``credits.unlimited: true`` "can
meter" (purchased credits keep serving past the plan's limit, and bill); ``has_credits:
false`` and not unlimited "hard stop".
"""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime
from typing import Any

import httpx

from ladder.core.types import OverageEvidence, WindowReading

from .base import (
    Adapter,
    ParsedQuota,
    evidence,
    expect_object,
    make_window,
    optional_bool,
    optional_epoch,
    optional_list,
    optional_number,
    optional_object,
    optional_string,
    parse_credential,
    quota_from_windows,
    unparseable,
    with_evidence,
)
from .http import bearer_headers, request_json
from .values import seconds_from_now

NAME = "codex"
DEFAULT_URL = "https://chatgpt.com/backend-api/wham/usage"
WINDOW_KEYS = (("primary", "primary_window"), ("secondary", "secondary_window"))


def _window(
    name: str, data: dict[str, Any], where: str, now: datetime, scope: str | None = None
) -> WindowReading:
    used = optional_number(data, "used_percent", where)
    reset_at = optional_epoch(data, "reset_at", where)
    if reset_at is None:
        # The absolute reset is preferred; the relative one drifts with response latency.
        after = optional_number(data, "reset_after_seconds", where)
        if after is not None:
            reset_at = seconds_from_now(now, after)
            if reset_at is None:
                raise unparseable(f"{where}.reset_after_seconds is out of range")
    return make_window(
        name, None if used is None else 100.0 - used, reset_at, now, model_scope=scope
    )


def _scoped_windows(body: dict[str, Any], now: datetime) -> list[WindowReading]:
    limits = optional_list(body, "additional_rate_limits", "usage")
    windows: list[WindowReading] = []
    for index, item in enumerate(limits or ()):
        where = f"additional_rate_limits[{index}]"
        entry = expect_object(item, where)
        name = optional_string(entry, "limit_name", where)
        rate_limit = optional_object(entry, "rate_limit", where)
        if rate_limit is None:
            continue
        # A limit without a name scopes nothing: it binds every request (fail closed).
        scope = name.strip().lower() if name is not None and name.strip() else None
        label = scope or f"additional_{index}"
        reached = optional_bool(rate_limit, "limit_reached", f"{where}.rate_limit") is True
        for suffix, key in WINDOW_KEYS:
            data = optional_object(rate_limit, key, f"{where}.rate_limit")
            if data is None:
                continue
            window = _window(f"{label}_{suffix}", data, f"{where}.rate_limit.{key}", now, scope)
            if reached:
                window = replace(window, remaining_percent=0.0)
            windows.append(window)
    return windows


def _evidence(body: dict[str, Any]) -> OverageEvidence | None:
    credits = optional_object(body, "credits", "usage")
    if credits is None:
        return None
    has_credits = optional_bool(credits, "has_credits", "usage.credits")
    unlimited = optional_bool(credits, "unlimited", "usage.credits")
    if unlimited is True:
        return evidence(True, "the usage says credits.unlimited: true")
    if has_credits is True:
        return evidence(True, "the usage says credits.has_credits: true")
    if has_credits is False:
        return evidence(False, "the usage says credits.has_credits: false")
    return None


def parse(payload: Any, now: datetime) -> ParsedQuota:
    """Turn a Codex usage payload into a reading; limit_reached means EXHAUSTED."""
    body = expect_object(payload, "usage")
    found = _evidence(body)
    rate_limit = optional_object(body, "rate_limit", "usage")
    scoped = _scoped_windows(body, now)
    if rate_limit is None:
        reading = quota_from_windows(scoped, empty_detail="the usage has no rate_limit")
        return with_evidence(reading, found)
    windows = []
    for name, key in WINDOW_KEYS:
        data = optional_object(rate_limit, key, "rate_limit")
        if data is not None:
            windows.append(_window(name, data, f"rate_limit.{key}", now))
    is_limit_reached = optional_bool(rate_limit, "limit_reached", "rate_limit") is True
    reading = quota_from_windows(
        [*windows, *scoped],
        is_limit_reached=is_limit_reached,
        empty_detail="the rate_limit has no primary or secondary window",
    )
    return with_evidence(reading, found)


def fetch(*, url: str, credential: str, client: httpx.Client) -> Any:
    """GET the usage endpoint with the bearer token (and the account id when given)."""
    fields = parse_credential(credential, adapter=NAME, optional=("account_id",))
    headers = bearer_headers(fields["access_token"])
    if "account_id" in fields:
        headers["ChatGPT-Account-Id"] = fields["account_id"]
    return request_json(client, "GET", url, headers)


ADAPTER = Adapter(name=NAME, default_url=DEFAULT_URL, fetch=fetch, parse=parse)
