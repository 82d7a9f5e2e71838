"""Claude (Anthropic OAuth plan) usage: ``GET /api/oauth/usage``.

Credential: the OAuth access token, bare (or ``{"access_token": "..."}``).

Payload, in two shapes and any mix of them (spec/ladder.md, "Windows scoped to a model"):

- the flat keys ``five_hour``, ``seven_day`` and ``seven_day_<family>`` (for example
  ``seven_day_opus``, scoped to that family), each possibly null, with ``utilization``
  (percent USED, may exceed 100) and ``resets_at`` (ISO 8601);
- the ``limits`` list, entries ``{kind, group, percent (USED), severity, resets_at,
  scope: {model: {id, display_name}} | null, is_active}``: kind ``session`` reads as
  ``five_hour``, ``weekly_all`` as ``seven_day``, ``weekly_scoped`` as
  ``seven_day_<family>`` scoped by ``scope.model``; an unknown kind is an unscoped window
  (fail closed). A limits-only payload reads exactly as its flat equivalent; a window
  given in both shapes is kept once, with the less remaining.

Billing evidence: ``spend.enabled`` (the newer field, which wins) else
``extra_usage.is_enabled``: true "can meter", false "hard stop". Every other key is
ignored.
"""

from __future__ import annotations

import re
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
    optional_list,
    optional_number,
    optional_object,
    optional_string,
    parse_credential,
    quota_from_windows,
    with_evidence,
)
from .http import bearer_headers, request_json

NAME = "claude"
DEFAULT_URL = "https://api.anthropic.com/api/oauth/usage"
BETA_HEADER = "oauth-2025-04-20"
SCOPED_PREFIX = "seven_day_"
# The flat seven_day_* keys that are not a model family.
_UNSCOPED_SEVEN_DAY = frozenset({"seven_day_oauth_apps"})
_FAMILY = re.compile(r"[A-Za-z0-9]+")
_KIND_NAMES = {"session": "five_hour", "weekly_all": "seven_day"}
_SCOPED_KIND = "weekly_scoped"


def _is_window_key(key: str) -> bool:
    return key in ("five_hour", "seven_day") or key.startswith(SCOPED_PREFIX)


def _flat_scope(key: str) -> str | None:
    if not key.startswith(SCOPED_PREFIX) or key in _UNSCOPED_SEVEN_DAY:
        return None
    return key.removeprefix(SCOPED_PREFIX).lower() or None


def _flat_windows(body: dict[str, Any], now: datetime) -> list[WindowReading]:
    windows = []
    for key, value in body.items():
        if not _is_window_key(key) or value is None:
            continue
        window = expect_object(value, key)
        utilization = optional_number(window, "utilization", key)
        remaining = None if utilization is None else 100.0 - utilization
        reset_at = optional_iso_instant(window, "resets_at", key)
        windows.append(make_window(key, remaining, reset_at, now, model_scope=_flat_scope(key)))
    return windows


def _is_single_token(text: str) -> bool:
    return _FAMILY.fullmatch(text) is not None


def _limit_scope(entry: dict[str, Any], where: str) -> str | None:
    """The model scope of a weekly_scoped entry: the family its model names (a single-word
    id or display name, as the flat key spells it), else the model id."""
    scope = optional_object(entry, "scope", where)
    model = None if scope is None else optional_object(scope, "model", f"{where}.scope")
    if model is None:
        return None
    model_id = optional_string(model, "id", f"{where}.scope.model")
    display = optional_string(model, "display_name", f"{where}.scope.model")
    for text in (model_id, display):
        if text is not None and _is_single_token(text.strip()):
            return text.strip().lower()
    if model_id is not None and model_id.strip():
        return model_id.strip().lower()
    return None


def _limit_windows(body: dict[str, Any], now: datetime) -> list[WindowReading]:
    limits = optional_list(body, "limits", "usage")
    windows = []
    for index, item in enumerate(limits or ()):
        where = f"limits[{index}]"
        entry = expect_object(item, where)
        kind = optional_string(entry, "kind", where) or ""
        used = optional_number(entry, "percent", where)
        remaining = None if used is None else 100.0 - used
        reset_at = optional_iso_instant(entry, "resets_at", where)
        scope = _limit_scope(entry, where) if kind == _SCOPED_KIND else None
        if kind in _KIND_NAMES:
            name = _KIND_NAMES[kind]
        elif kind == _SCOPED_KIND and scope is not None:
            name = f"{SCOPED_PREFIX}{scope}"
        else:
            # An unknown kind (or a scoped cap naming no model) binds every request.
            group = optional_string(entry, "group", where)
            name = f"limits.{kind or 'unknown'}" + (f".{group}" if group else "")
        windows.append(make_window(name, remaining, reset_at, now, model_scope=scope))
    return windows


def _merged(windows: list[WindowReading]) -> list[WindowReading]:
    """Each window once, by name; a window given in both shapes keeps the less remaining
    (an unknown amount counts as less: fail closed)."""
    merged: dict[str, WindowReading] = {}
    for window in windows:
        kept = merged.get(window.name)
        if kept is None or _less_safe(window, kept):
            merged[window.name] = window
    return list(merged.values())


def _less_safe(window: WindowReading, kept: WindowReading) -> bool:
    if window.remaining_percent is None:
        return kept.remaining_percent is not None
    return kept.remaining_percent is not None and window.remaining_percent < kept.remaining_percent


def _evidence(body: dict[str, Any]) -> OverageEvidence | None:
    spend = optional_object(body, "spend", "usage")
    enabled = None if spend is None else optional_bool(spend, "enabled", "usage.spend")
    if enabled is not None:
        return evidence(enabled, f"the usage says spend.enabled: {str(enabled).lower()}")
    extra = optional_object(body, "extra_usage", "usage")
    enabled = None if extra is None else optional_bool(extra, "is_enabled", "usage.extra_usage")
    if enabled is not None:
        return evidence(enabled, f"the usage says extra_usage.is_enabled: {str(enabled).lower()}")
    return None


def parse(payload: Any, now: datetime) -> ParsedQuota:
    """Turn a Claude usage payload (flat keys, `limits`, or both) into a reading:
    remaining = 100 - percent used; windows scoped to a model bind only that model."""
    body = expect_object(payload, "usage")
    windows = _merged([*_flat_windows(body, now), *_limit_windows(body, now)])
    reading = quota_from_windows(
        windows, empty_detail="no five_hour or seven_day window in the usage"
    )
    return with_evidence(reading, _evidence(body))


def fetch(*, url: str, credential: str, client: httpx.Client) -> Any:
    """GET the usage endpoint with the OAuth bearer token and the OAuth beta header."""
    token = parse_credential(credential, adapter=NAME)["access_token"]
    headers = {**bearer_headers(token), "anthropic-beta": BETA_HEADER}
    return request_json(client, "GET", url, headers)


ADAPTER = Adapter(name=NAME, default_url=DEFAULT_URL, fetch=fetch, parse=parse)
