"""The API side of spend reports: a body as the service's SpendInput, and the answer of
a batch, where each entry is validated on its own and refused in its own slot."""

from __future__ import annotations

from datetime import datetime
from decimal import Decimal
from typing import Any, cast

from django.core.exceptions import ValidationError as DjangoValidationError
from django.http import HttpRequest
from ninja.responses import NinjaJSONEncoder
from pydantic import ValidationError as PydanticValidationError

from ladder import services
from ladder.models import ApiToken, SpendEntry
from ladder.schemas import SpendEntryIn
from omniroute_admin.errors import validation_error_body

# A refused entry's errors, located inside the entry: [{"loc", "msg", "type"}].
EntryErrors = list[dict[str, Any]]


def spend_input_of(payload: Any, token_id: int | None = None) -> services.SpendInput:
    """A validated body (SpendIn, or a batch entry's SpendEntryIn) as the service's
    input (costs as exact decimals), reported by the API token `token_id`."""
    cost = payload.cost_usd
    return services.SpendInput(
        request_id=payload.request_id,
        connection_id=payload.connection_id,
        provider=payload.provider,
        model=payload.model,
        cost_usd=Decimal(str(cost)) if cost is not None else None,
        input_tokens=payload.input_tokens,
        output_tokens=payload.output_tokens,
        occurred_at=payload.occurred_at,
        token_id=token_id,
    )


def parse_entry(raw: Any, token_id: int | None = None) -> services.SpendInput | EntryErrors:
    """One batch entry validated exactly as POST /spend's body, or its errors."""
    try:
        payload = SpendEntryIn.model_validate(raw)
    except PydanticValidationError as error:
        return [
            {"loc": list(e["loc"]), "msg": e["msg"], "type": e["type"]}
            for e in error.errors(include_url=False)
        ]
    return spend_input_of(payload, token_id)


def token_id_of(request: HttpRequest) -> int | None:
    """The id of the API token that authenticated `request` (None: no token)."""
    token = getattr(request, "auth", None)
    return token.pk if isinstance(token, ApiToken) else None


def entry_error(index: int, errors: EntryErrors) -> dict[str, Any]:
    """A refused entry's slot: its errors as the single endpoint's 422 lists them,
    located at the entry (["body", "payload", "entries", index, field])."""
    return {
        "error": [
            {
                "loc": ["body", "payload", "entries", index, *error["loc"]],
                "msg": error["msg"],
                "type": error["type"],
            }
            for error in errors
        ]
    }


def _domain_errors(error: DjangoValidationError) -> EntryErrors:
    # validation_error_body locates fields at ["body", "payload", field]: keep the field.
    detail = cast(EntryErrors, validation_error_body(error)["detail"])
    return [{**e, "loc": e["loc"][2:]} for e in detail]


def batch_results(
    parsed: list[services.SpendInput | EntryErrors], batch: services.SpendBatch
) -> list[Any]:
    """The results of a batch in the order of its entries: the stored entry, or the
    errors of one refused by the schema (`parsed`) or by the service (`batch`)."""
    stored = iter(batch.results)
    results: list[Any] = []
    # Each distinct instant formatted once, as the renderer would (most entries of a
    # batch share the instant it was received at): the encoder's callback for every
    # datetime was half of rendering a thousand results.
    times: dict[tuple[datetime, Any], str] = {}
    for index, item in enumerate(parsed):
        if not isinstance(item, services.SpendInput):
            results.append(entry_error(index, item))
            continue
        outcome = next(stored)
        if isinstance(outcome, DjangoValidationError):
            results.append(entry_error(index, _domain_errors(outcome)))
            continue
        out = entry_out(outcome)
        moment = out["occurred_at"]
        # Keyed with its zone too: equal instants in two zones are written apart.
        key = (moment, moment.tzinfo)
        text = times.get(key)
        if text is None:
            text = times[key] = _format_time(moment)
        out["occurred_at"] = text
        results.append(out)
    return results


def entry_out(entry: SpendEntry) -> dict[str, Any]:
    """A ledger entry as SpendOut shows it, as a plain dict (a property test holds it
    to SpendOut's; built by hand, it costs a fifth of the schema's from_orm)."""
    return {
        "request_id": entry.request_id,
        "connection_id": entry.connection_id,
        "provider": entry.provider,
        "model": entry.model,
        "cost_usd": float(entry.cost_usd),
        "input_tokens": entry.input_tokens,
        "output_tokens": entry.output_tokens,
        "occurred_at": entry.occurred_at,
        "rung": entry.rung,
        "billed_usd": float(entry.billed_usd),
        "list_price_usd": float(entry.list_price_usd),
    }


# The API's JSON renderer's (ninja's JSONRenderer: json.dumps with NinjaJSONEncoder),
# made once rather than per answer; its callback writes an instant as the API does.
_encoder = NinjaJSONEncoder()
_encode = _encoder.encode
_format_time = _encoder.default


def spend_body(entry: SpendEntry) -> bytes:
    """The body POST /api/v1/spend answers for a stored entry, as the endpoint renders
    SpendOut, byte for byte."""
    return _encode(entry_out(entry)).encode()


def batch_body(batch: services.SpendBatch, results: list[Any]) -> bytes:
    """The body POST /api/v1/spend/batch answers, as the endpoint would render
    SpendBatchOut from these results, byte for byte (a property test holds the two
    equal): the schema's validation of a thousand results, each tried against both
    kinds of slot, was a twentieth of a batch's time."""
    return _encode(
        {"created": batch.created, "duplicates": batch.duplicates, "results": results}
    ).encode()
