"""GitHub Copilot plan usage: ``GET /copilot_internal/user``.

Credential: the GitHub OAuth token of the Copilot login (sent as ``Authorization: token
...``), bare or as ``{"access_token": "..."}``.

Payload: ``quota_snapshots.premium_interactions`` / ``chat`` / ``completions``, each with
``percent_remaining``, ``remaining``, ``entitlement`` and ``unlimited``; the top-level
``quota_reset_date`` (a date such as "2026-12-01", read as midnight UTC, or an ISO time)
is every limited window's reset. ``quota_reset_date_utc``, when present, is preferred
because it is an exact instant.

Billing evidence: any snapshot's ``overage_permitted: true`` "can meter" (the seat opted
into paid premium requests); every snapshot's ``false`` "hard stop".
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
    optional_iso_instant,
    optional_number,
    optional_object,
    parse_credential,
    quota_from_windows,
)
from .http import request_json

NAME = "copilot"
DEFAULT_URL = "https://api.github.com/copilot_internal/user"
SNAPSHOT_NAMES = ("premium_interactions", "chat", "completions")


def _remaining_percent(data: dict[str, Any], where: str) -> float | None:
    percent = optional_number(data, "percent_remaining", where)
    if percent is not None:
        return percent
    # Older answers carry only the counts.
    remaining = optional_number(data, "remaining", where)
    entitlement = optional_number(data, "entitlement", where)
    if remaining is None or entitlement is None or entitlement <= 0:
        return None
    return remaining / entitlement * 100.0


def _evidence(snapshots: dict[str, Any]) -> OverageEvidence | None:
    said: dict[str, bool | None] = {}
    for name, value in snapshots.items():
        if isinstance(value, dict):
            said[name] = optional_bool(value, "overage_permitted", f"quota_snapshots.{name}")
    permitted = [name for name, value in said.items() if value is True]
    if permitted:
        return evidence(
            True, f"the usage says quota_snapshots.{permitted[0]}.overage_permitted: true"
        )
    if said and all(value is False for value in said.values()):
        return evidence(False, "the usage says overage_permitted: false on every quota snapshot")
    return None


def parse(payload: Any, now: datetime) -> ParsedQuota:
    """Turn a Copilot user payload into a reading; unlimited windows bind only if all are."""
    body = expect_object(payload, "user")
    snapshots = optional_object(body, "quota_snapshots", "user")
    if snapshots is None:
        return quota_from_windows((), empty_detail="the user has no quota_snapshots")
    found = _evidence(snapshots)
    reset_at = optional_iso_instant(body, "quota_reset_date_utc", "user") or optional_iso_instant(
        body, "quota_reset_date", "user"
    )
    windows: list[WindowReading] = []
    limited: list[WindowReading] = []
    for name in SNAPSHOT_NAMES:
        data = optional_object(snapshots, name, "quota_snapshots")
        if data is None:
            continue
        where = f"quota_snapshots.{name}"
        if optional_bool(data, "unlimited", where) is True:
            # Deliberately no reset: an unlimited window has nothing to refill.
            windows.append(WindowReading(name=name, remaining_percent=100.0, reset_at=None))
            continue
        window = make_window(name, _remaining_percent(data, where), reset_at, now)
        windows.append(window)
        limited.append(window)
    # An unlimited window reads 100 % and must never mask a limited one that is unknown.
    reading = quota_from_windows(
        limited or windows, empty_detail="quota_snapshots holds no known window"
    )
    return replace(reading, windows=tuple(windows), evidence=found)


def fetch(*, url: str, credential: str, client: httpx.Client) -> Any:
    """GET the Copilot user endpoint with GitHub's "token" authorization scheme."""
    token = parse_credential(credential, adapter=NAME)["access_token"]
    headers = {"Accept": "application/json", "Authorization": f"token {token}"}
    return request_json(client, "GET", url, headers)


ADAPTER = Adapter(name=NAME, default_url=DEFAULT_URL, fetch=fetch, parse=parse)
