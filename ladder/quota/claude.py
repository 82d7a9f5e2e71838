"""Claude (Anthropic OAuth plan) usage: ``GET /api/oauth/usage``.

Credential: the OAuth access token, bare (or ``{"access_token": "..."}``).

Payload: objects ``five_hour``, ``seven_day`` and ``seven_day_<name>`` (for example
``seven_day_opus``), each possibly null, with ``utilization`` (percent USED, may exceed
100) and ``resets_at`` (ISO 8601). Every other key is ignored.
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
    optional_iso_instant,
    optional_number,
    parse_credential,
    quota_from_windows,
)
from .http import bearer_headers, request_json

NAME = "claude"
DEFAULT_URL = "https://api.anthropic.com/api/oauth/usage"
BETA_HEADER = "oauth-2025-04-20"


def _is_window_key(key: str) -> bool:
    return key in ("five_hour", "seven_day") or key.startswith("seven_day_")


def parse(payload: Any, now: datetime) -> ParsedQuota:
    """Turn a Claude usage payload into a reading: remaining = 100 - utilization."""
    body = expect_object(payload, "usage")
    windows: list[WindowReading] = []
    for key, value in body.items():
        if not _is_window_key(key) or value is None:
            continue
        window = expect_object(value, key)
        utilization = optional_number(window, "utilization", key)
        remaining = None if utilization is None else 100.0 - utilization
        reset_at = optional_iso_instant(window, "resets_at", key)
        windows.append(make_window(key, remaining, reset_at, now))
    return quota_from_windows(windows, empty_detail="no five_hour or seven_day window in the usage")


def fetch(*, url: str, credential: str, client: httpx.Client) -> Any:
    """GET the usage endpoint with the OAuth bearer token and the OAuth beta header."""
    token = parse_credential(credential, adapter=NAME)["access_token"]
    headers = {**bearer_headers(token), "anthropic-beta": BETA_HEADER}
    return request_json(client, "GET", url, headers)


ADAPTER = Adapter(name=NAME, default_url=DEFAULT_URL, fetch=fetch, parse=parse)
