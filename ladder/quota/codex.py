"""Codex (ChatGPT plan) usage: ``GET /backend-api/wham/usage``.

Credential: the ChatGPT OAuth access token, bare, or
``{"access_token": "...", "account_id": "..."}``; ``account_id`` (optional) is sent as
``ChatGPT-Account-Id``, which selects the workspace for a login that belongs to several.

Payload: ``rate_limit.primary_window`` and ``rate_limit.secondary_window`` (either may be
null) with ``used_percent``, ``reset_at`` (epoch seconds) or ``reset_after_seconds``
(relative to now) and ``limit_window_seconds``; ``rate_limit.limit_reached`` true means
exhausted whatever the percentages say.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

import httpx

from ladder.core.types import WindowReading

from .base import (
    Adapter,
    ParsedQuota,
    expect_object,
    make_window,
    optional_bool,
    optional_epoch,
    optional_number,
    optional_object,
    parse_credential,
    quota_from_windows,
    unparseable,
)
from .http import bearer_headers, request_json
from .values import seconds_from_now

NAME = "codex"
DEFAULT_URL = "https://chatgpt.com/backend-api/wham/usage"
WINDOW_KEYS = (("primary", "primary_window"), ("secondary", "secondary_window"))


def _window(name: str, data: dict[str, Any], where: str, now: datetime) -> WindowReading:
    used = optional_number(data, "used_percent", where)
    reset_at = optional_epoch(data, "reset_at", where)
    if reset_at is None:
        # The absolute reset is preferred; the relative one drifts with response latency.
        after = optional_number(data, "reset_after_seconds", where)
        if after is not None:
            reset_at = seconds_from_now(now, after)
            if reset_at is None:
                raise unparseable(f"{where}.reset_after_seconds is out of range")
    return make_window(name, None if used is None else 100.0 - used, reset_at, now)


def parse(payload: Any, now: datetime) -> ParsedQuota:
    """Turn a Codex usage payload into a reading; limit_reached means EXHAUSTED."""
    body = expect_object(payload, "usage")
    rate_limit = optional_object(body, "rate_limit", "usage")
    if rate_limit is None:
        return quota_from_windows((), empty_detail="the usage has no rate_limit")
    windows = []
    for name, key in WINDOW_KEYS:
        data = optional_object(rate_limit, key, "rate_limit")
        if data is not None:
            windows.append(_window(name, data, f"rate_limit.{key}", now))
    is_limit_reached = optional_bool(rate_limit, "limit_reached", "rate_limit") is True
    return quota_from_windows(
        windows,
        is_limit_reached=is_limit_reached,
        empty_detail="the rate_limit has no primary or secondary window",
    )


def fetch(*, url: str, credential: str, client: httpx.Client) -> Any:
    """GET the usage endpoint with the bearer token (and the account id when given)."""
    fields = parse_credential(credential, adapter=NAME, optional=("account_id",))
    headers = bearer_headers(fields["access_token"])
    if "account_id" in fields:
        headers["ChatGPT-Account-Id"] = fields["account_id"]
    return request_json(client, "GET", url, headers)


ADAPTER = Adapter(name=NAME, default_url=DEFAULT_URL, fetch=fetch, parse=parse)
