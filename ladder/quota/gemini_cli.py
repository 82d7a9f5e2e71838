"""Gemini CLI (Google Code Assist plan) usage: ``POST /v1internal:retrieveUserQuota``.

Credential: a JSON object ``{"access_token": "<OAuth access token>", "project":
"<Code Assist project id>"}``. Both keys are required: the quota belongs to the project,
and the endpoint needs it in the request body ``{"project": ...}``. A bare token is
refused as ``credential_invalid`` before anything is sent.

Payload: ``buckets[]``, each with ``modelId``, ``remainingFraction`` (0..1), ``resetTime``
(ISO 8601) and maybe ``tokenType`` (ignored). Each bucket is a window named by its model;
a bucket without ``remainingFraction`` is an unknown window.
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
    optional_list,
    optional_number,
    optional_string,
    parse_credential,
    quota_from_windows,
)
from .http import bearer_headers, request_json

NAME = "gemini-cli"
DEFAULT_URL = "https://cloudcode-pa.googleapis.com/v1internal:retrieveUserQuota"


def parse(payload: Any, now: datetime) -> ParsedQuota:
    """Turn a retrieveUserQuota payload into a reading, one window per bucket."""
    body = expect_object(payload, "quota")
    buckets = optional_list(body, "buckets", "quota")
    windows: list[WindowReading] = []
    for index, item in enumerate(buckets or ()):
        where = f"buckets[{index}]"
        bucket = expect_object(item, where)
        name = optional_string(bucket, "modelId", where) or f"bucket {index}"
        fraction = optional_number(bucket, "remainingFraction", where)
        reset_at = optional_iso_instant(bucket, "resetTime", where)
        windows.append(
            make_window(name, None if fraction is None else fraction * 100.0, reset_at, now)
        )
    return quota_from_windows(windows, empty_detail="the quota has no buckets")


def fetch(*, url: str, credential: str, client: httpx.Client) -> Any:
    """POST the project to retrieveUserQuota with the bearer token."""
    fields = parse_credential(credential, adapter=NAME, required=("project",))
    body = {"project": fields["project"]}
    return request_json(client, "POST", url, bearer_headers(fields["access_token"]), json=body)


ADAPTER = Adapter(name=NAME, default_url=DEFAULT_URL, fetch=fetch, parse=parse)
