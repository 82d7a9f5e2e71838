"""Recorded-shape usage payloads for the parser and fetch tests."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

PAYLOADS = Path(__file__).parent / "payloads"
# The one clock every quota test reads.
NOW = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)


def load(name: str) -> Any:
    """Return a fresh copy of payloads/<name>.json, safe for a test to mutate."""
    return json.loads((PAYLOADS / f"{name}.json").read_text())


def raw(name: str) -> bytes:
    """Return payloads/<name>.json exactly as stored."""
    return (PAYLOADS / f"{name}.json").read_bytes()
