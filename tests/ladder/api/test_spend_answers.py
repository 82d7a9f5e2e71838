"""The spend answers built by hand (spend_answers.entry_out, spend_body, batch_body) are
SpendOut's and SpendBatchOut's, as the endpoint renders them, for any ledger entry."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta, timezone
from decimal import Decimal
from typing import Any

from django.db.models.signals import post_init
from hypothesis import given
from hypothesis import strategies as st
from ninja.responses import NinjaJSONEncoder

from ladder.api.spend_answers import batch_body, batch_results, entry_error, entry_out, spend_body
from ladder.models import SpendEntry
from ladder.schemas import SpendBatchOut, SpendOut
from ladder.services.spend import SpendInput, unsaved_entry
from ladder.services.spend_batch import SpendBatch

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
    assert sorted(fast.__dict__) == sorted(slow.__dict__)
    assert (fast.pk, fast.recorded_at, fast._state.adding, fast._state.db) == (
        None,
        None,
        True,
        None,
    )


def test_an_unsaved_entry_sends_the_init_signals_while_something_listens() -> None:
    seen: list[str] = []

    def listen(sender: Any, instance: SpendEntry, **kwargs: Any) -> None:
        seen.append(instance.request_id)

    post_init.connect(listen, sender=SpendEntry)
    try:
        entry = unsaved_entry({"request_id": "heard", "rung": "cheap"})
    finally:
        post_init.disconnect(listen, sender=SpendEntry)
    quiet = unsaved_entry({"request_id": "unheard", "rung": "cheap"})

    assert (seen, entry.rung, entry.pk, quiet.request_id) == (["heard"], "cheap", None, "unheard")


def _entry(rung: str, cost: Decimal, occurred_at: datetime, tokens: int | None) -> SpendEntry:
    return SpendEntry(
        request_id=f"r-{cost}",
        connection_id="openai-key",
        provider="openai",
        model="gpt-4o-mini",
        cost_usd=cost,
        billed_usd=cost,
        list_price_usd=cost,
        input_tokens=tokens,
        output_tokens=None,
        rung=rung,
        occurred_at=occurred_at,
    )


error_slot = st.builds(
    entry_error,
    st.integers(min_value=0, max_value=999),
    st.lists(
        st.fixed_dictionaries(
            {
                "loc": st.lists(st.text(max_size=12) | st.integers(0, 5), max_size=3),
                "msg": st.text(max_size=40),
                "type": st.text(max_size=20),
            }
        ),
        min_size=1,
        max_size=3,
    ),
)
entry_slot = st.builds(
    lambda *args: entry_out(_entry(*args)),
    st.sampled_from(["subscription", "free", "cheap", "premium"]),
    money,
    moment,
    tokens,
)


@given(
    created=st.integers(min_value=0, max_value=1000),
    duplicates=st.integers(min_value=0, max_value=1000),
    results=st.lists(entry_slot | error_slot, max_size=8),
)
def test_the_hand_built_batch_answer_is_the_schemas(
    created: int, duplicates: int, results: list[Any]
) -> None:
    batch = SpendBatch([], created, duplicates)
    body = {"created": created, "duplicates": duplicates, "results": results}

    rendered = json.dumps(SpendBatchOut.model_validate(body).model_dump(), cls=NinjaJSONEncoder)

    assert batch_body(batch, results) == rendered.encode()


zones = st.sampled_from([UTC, timezone(timedelta(hours=1)), timezone(timedelta(hours=-5))])
shared = datetime(2026, 12, 2, 8, 0, 0, 250000, tzinfo=UTC)


@given(
    moments=st.lists(
        st.tuples(st.sampled_from([shared, shared.replace(microsecond=0)]) | moment, zones).map(
            lambda pair: pair[0].astimezone(pair[1])
        ),
        max_size=8,
    ),
    cost=money,
)
def test_a_batchs_results_format_each_instant_as_the_renderer_does(
    moments: list[datetime], cost: Decimal
) -> None:
    # Instants repeat (one is shared) and equal instants come in other zones: each is
    # formatted once and written as the renderer writes it.
    entries = [_entry("cheap", cost, moment, None) for moment in moments]
    parsed: list[Any] = [
        SpendInput(request_id=e.request_id, connection_id="c", provider="p", model="m")
        for e in entries
    ]
    batch = SpendBatch(list(entries), len(entries), 0)

    results = batch_results(parsed, batch)
    rendered = json.dumps(
        SpendBatchOut.model_validate(
            {"created": len(entries), "duplicates": 0, "results": [entry_out(e) for e in entries]}
        ).model_dump(),
        cls=NinjaJSONEncoder,
    )

    assert batch_body(batch, results) == rendered.encode()
    assert [r["occurred_at"] for r in results] == [
        json.loads(json.dumps(m, cls=NinjaJSONEncoder)) for m in moments
    ]
