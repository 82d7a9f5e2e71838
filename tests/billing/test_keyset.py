"""The one keyset cursor codec (billing/keyset.py): positions round-trip, and anything
this API did not give out is refused with the same sentence."""

from __future__ import annotations

import base64
from datetime import UTC, datetime

import pytest

from billing.keyset import REFUSED, decode_position, encode_position

AT = datetime(2026, 12, 3, 9, 30, 15, 250000, tzinfo=UTC)


def _raw(text: str) -> str:
    return base64.urlsafe_b64encode(text.encode()).rstrip(b"=").decode()


def test_a_position_round_trips_with_its_kinds() -> None:
    cursor = encode_position(AT, 42)

    assert decode_position(cursor, datetime, int) == (AT, 42)


def test_the_text_is_the_compact_json_list_in_url_safe_base64_without_padding() -> None:
    assert encode_position("openai", "gpt-4o") == _raw('["openai","gpt-4o"]')
    assert encode_position(AT, 7) == _raw('["2026-12-03T09:30:15.250000+00:00",7]')


@pytest.mark.parametrize(
    "cursor",
    [
        pytest.param("not base64!", id="not-base64"),
        pytest.param(_raw("{}"), id="not-a-list"),
        pytest.param(_raw('["2026-12-03T09:30:15+00:00"]'), id="too-short"),
        pytest.param(_raw('["2026-12-03T09:30:15", 1]'), id="naive-instant"),
        pytest.param(_raw('["yesterday", 1]'), id="not-an-instant"),
        pytest.param(_raw('["2026-12-03T09:30:15+00:00", true]'), id="boolean-id"),
        pytest.param(_raw('["2026-12-03T09:30:15+00:00", 0]'), id="zero-id"),
        pytest.param(_raw('["2026-12-03T09:30:15+00:00", 9223372036854775808]'), id="huge-id"),
        pytest.param(_raw("[" * 5000 + "]" * 5000), id="nested-deep"),
    ],
)
def test_anything_else_is_refused_with_one_sentence(cursor: str) -> None:
    with pytest.raises(ValueError, match=r"^Not a cursor this API gave out") as refused:
        decode_position(cursor, datetime, int)

    assert str(refused.value) == REFUSED
