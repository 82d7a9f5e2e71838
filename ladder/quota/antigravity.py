"""Antigravity (Google plan) usage: ``POST /v1internal:fetchAvailableModels``.

Credential: the OAuth access token, bare, or ``{"access_token": "...", "project":
"..."}``; the project (optional) is sent in the request body, otherwise the body is ``{}``.

Payload: ``models.<id>.quotaInfo`` with ``remainingFraction`` (0..1) and ``resetTime``
(ISO 8601). Each model with ``quotaInfo`` is a window named by its id. A missing
fraction is an unknown window, never an exhausted one. Models flagged ``isInternal``
(the IDE's own helpers) are skipped: they are not what a gateway routes to.
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
    optional_iso_instant,
    optional_number,
    optional_object,
    parse_credential,
    quota_from_windows,
)
from .http import bearer_headers, request_json

NAME = "antigravity"
DEFAULT_URL = "https://cloudcode-pa.googleapis.com/v1internal:fetchAvailableModels"


def parse(payload: Any, now: datetime) -> ParsedQuota:
    """Turn a fetchAvailableModels payload into a reading, one window per model."""
    body = expect_object(payload, "models response")
    models = optional_object(body, "models", "models response")
    windows: list[WindowReading] = []
    for model_id, entry in (models or {}).items():
        where = f"models.{model_id}"
        model = expect_object(entry, where)
        if optional_bool(model, "isInternal", where) is True:
            continue
        quota_info = optional_object(model, "quotaInfo", where)
        if quota_info is None:
            continue
        where = f"{where}.quotaInfo"
        fraction = optional_number(quota_info, "remainingFraction", where)
        reset_at = optional_iso_instant(quota_info, "resetTime", where)
        windows.append(
            make_window(model_id, None if fraction is None else fraction * 100.0, reset_at, now)
        )
    return quota_from_windows(windows, empty_detail="no model carries quotaInfo")


def fetch(*, url: str, credential: str, client: httpx.Client) -> Any:
    """POST fetchAvailableModels (with the project when known) and the bearer token."""
    fields = parse_credential(credential, adapter=NAME, optional=("project",))
    body = {"project": fields["project"]} if "project" in fields else {}
    return request_json(client, "POST", url, bearer_headers(fields["access_token"]), json=body)


ADAPTER = Adapter(name=NAME, default_url=DEFAULT_URL, fetch=fetch, parse=parse)
