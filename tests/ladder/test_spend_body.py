"""The spend answer built by hand (spend_answers.entry_out, spend_body) is SpendOut's,
as the endpoint renders it, for any ledger entry."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

from hypothesis import given
from hypothesis import strategies as st
from ninja.responses import NinjaJSONEncoder

from ladder.models import SpendEntry
from ladder.schemas import SpendOut
from ladder.services.spend import unsaved_entry
from ladder.spend_answers import entry_out, spend_body

money = st.decimals(min_value=0, max_value=Decimal("99999999.99999999"), places=8)
tokens = st.none() | st.integers(min_value=0, max_value=10**12)
text = st.text(min_size=1, max_size=40)
moment = st.datetimes(
    min_value=datetime(2000, 1, 1), max_value=datetime(2100, 1, 1), timezones=st.just(UTC)
)


@given(
    request_id=text,
    connection_id=text,
    provider=text,
    model=text,
    cost=money,
    billed=money,
    listed=money,
    input_tokens=tokens,
    output_tokens=tokens,
    rung=st.sampled_from(["subscription", "free", "cheap", "premium"]),
    occurred_at=moment,
)
def test_the_hand_built_answer_is_the_schemas(
    request_id: str,
    connection_id: str,
    provider: str,
    model: str,
    cost: Decimal,
    billed: Decimal,
    listed: Decimal,
    input_tokens: int | None,
    output_tokens: int | None,
    rung: str,
    occurred_at: datetime,
) -> None:
    entry = SpendEntry(
        request_id=request_id,
        connection_id=connection_id,
        provider=provider,
        model=model,
        cost_usd=cost,
        billed_usd=billed,
        list_price_usd=listed,
        input_tokens=input_tokens,
        output_tokens=output_tokens,
        rung=rung,
        occurred_at=occurred_at,
    )
    schemas = SpendOut.from_orm(entry).model_dump()
    assert entry_out(entry) == schemas
    assert list(entry_out(entry)) == list(SpendOut.model_fields)
    assert spend_body(entry) == json.dumps(schemas, cls=NinjaJSONEncoder).encode()


def test_a_body_shows_the_endpoints_field_formats() -> None:
    entry = SpendEntry(
        request_id="r1",
        connection_id="openai-key",
        provider="openai",
        model="gpt-4o-mini",
        cost_usd=Decimal("0.00033000"),
        billed_usd=Decimal("0.00033000"),
        list_price_usd=Decimal("0.00033000"),
        input_tokens=1200,
        output_tokens=None,
        rung="cheap",
        occurred_at=datetime(2026, 12, 2, 1, 2, 3, 456789, tzinfo=UTC),
    )
    assert spend_body(entry) == (
        b'{"request_id": "r1", "connection_id": "openai-key", "provider": "openai", '
        b'"model": "gpt-4o-mini", "cost_usd": 0.00033, "input_tokens": 1200, '
        b'"output_tokens": null, "occurred_at": "2026-12-02T01:02:03.456Z", '
        b'"rung": "cheap", "billed_usd": 0.00033, "list_price_usd": 0.00033}'
    )


def test_an_unsaved_entry_built_positionally_is_the_keyword_built_one() -> None:
    values: dict[str, Any] = {
        "request_id": "r1",
        "connection_id": "openai-key",
        "provider": "openai",
        "model": "gpt-4o-mini",
        "cost_usd": Decimal("0.5"),
        "is_cost_computed": True,
        "billed_usd": Decimal("0"),
        "list_price_usd": Decimal("0.5"),
        "input_tokens": 10,
        "output_tokens": None,
        "rung": "subscription",
        "occurred_at": datetime(2026, 12, 2, tzinfo=UTC),
    }
    fast, slow = unsaved_entry(values), SpendEntry(**values)
    names = [field.attname for field in SpendEntry._meta.concrete_fields]
    assert [getattr(fast, name) for name in names] == [getattr(slow, name) for name in names]
    assert (fast.pk, fast.recorded_at, fast._state.adding) == (None, None, True)
