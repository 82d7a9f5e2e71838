"""Text every app checks the same way, domain-free: the characters no stored or searched
text may hold (C0 and C1 control characters, NUL, CR, LF..., and lone surrogates, which
are not encodable; PostgreSQL refuses a NUL in a parameter)."""

from __future__ import annotations

import re

BAD_CHARACTER = re.compile(r"[\x00-\x1f\x7f-\x9f\ud800-\udfff]")


def without_bad_characters(value: str) -> str:
    """The text with control characters and lone surrogates removed (for a search
    string: PostgreSQL refuses NUL in a query parameter)."""
    return BAD_CHARACTER.sub("", value)
