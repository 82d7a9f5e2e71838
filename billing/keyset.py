"""Keyset cursors, one codec for every paged list (`GET /prices`, `GET /spend`,
`GET /pools/{auto_id}/history`): a position (a few strings, ids and instants) as opaque
URL-safe text, and back. Pure and domain-free: each caller names its parts' kinds and
checks what only it knows."""

from __future__ import annotations

import base64
import json
from datetime import datetime
from typing import Any

REFUSED = "Not a cursor this API gave out; start again without one."
Part = str | int | datetime


def encode_position(*parts: Part) -> str:
    """An opaque cursor for a position; instants as ISO text."""
    values = [part.isoformat() if isinstance(part, datetime) else part for part in parts]
    text = json.dumps(values, ensure_ascii=True, separators=(",", ":"))
    return base64.urlsafe_b64encode(text.encode()).rstrip(b"=").decode()


def decode_position(cursor: str, *kinds: type[Part]) -> tuple[Any, ...]:
    """The parts of a cursor this API gave out, each of its kind: `str`, `int` (a row id:
    a positive 63-bit integer, never a boolean) or `datetime` (an instant with its zone);
    ValueError(REFUSED) for anything else."""
    try:
        raw = base64.b64decode(cursor + "=" * (-len(cursor) % 4), altchars=b"-_", validate=True)
        values = json.loads(raw.decode("ascii"))
    except (ValueError, RecursionError):
        raise ValueError(REFUSED) from None
    if not isinstance(values, list) or len(values) != len(kinds):
        raise ValueError(REFUSED)
    return tuple(_part(value, kind) for value, kind in zip(values, kinds, strict=True))


def _part(value: Any, kind: type[Part]) -> Part:
    if kind is int:
        if type(value) is not int or not 0 < value < 2**63:
            raise ValueError(REFUSED)
        return value
    if not isinstance(value, str):
        raise ValueError(REFUSED)
    if kind is datetime:
        try:
            instant = datetime.fromisoformat(value)
        except ValueError:
            raise ValueError(REFUSED) from None
        if instant.tzinfo is None:
            raise ValueError(REFUSED)
        return instant
    return value
