"""The pool hot path's answers: a decision in the contract's shape, its rendered body and
its tag (cached per decision object), the caching headers a gateway keeps it by, and the
cached answer the fast lane serves without the router. Shared by the pool endpoints
(ladder.api) and omniroute_admin.fast_lane.

A decision's tag (`ETag`) is its version: a digest of what it says, not of when it was
said. It leaves out `computed_at`, `valid_until` and the exclusions' `detail` sentences
(which count seconds from `computed_at`: "cooling down ... (120 s from now)", "the
reading is 700 s old"), so two processes, or a recomputation after `valid_until`, give
the same tag whenever the pool, the exclusions with their reasons and `next_change_at`
are the same. The bodies of one tag may differ in those fields only, hence a weak tag
(`W/"..."`, RFC 9110 8.8.1), compared weakly as `If-None-Match` requires anyway. See
docs/HOT_PATH.md, "Caching a decision in the gateway"."""

from __future__ import annotations

import hashlib
import json
import time
import weakref
from datetime import datetime
from typing import Annotated, Any, NamedTuple

from django.conf import settings
from django.http import HttpRequest, HttpResponse, HttpResponseNotModified
from django.utils import timezone
from ninja import Header
from ninja.responses import NinjaJSONEncoder

from ladder import metrics, services
from ladder.core import AutoId, Decision, InvalidAutoId, UnknownTier, parse_auto_id
from ladder.lru import ByteBoundedLRU
from ladder.models import ApiToken
from ladder.tokens import authenticate


def _detail(message: str) -> dict[str, str]:
    return {"detail": message}


def decision_out(decision: Decision) -> dict[str, Any]:
    """A decision in the contract's shape."""
    auto_id = decision.auto_id
    return {
        "auto_id": auto_id.auto_id,
        "grouping": auto_id.grouping.value,
        "category": auto_id.category,
        "fail_mode": auto_id.fail_mode,
        "computed_at": decision.computed_at,
        "candidates": [
            {
                "id": c.id,
                "ref": c.ref,
                "provider": c.provider,
                "model": c.model,
                "rung": c.rung.label,
                "connection_id": c.connection_id,
                "allowed_connection_ids": list(c.allowed_connection_ids)
                if c.allowed_connection_ids is not None
                else None,
            }
            for c in decision.candidates
        ],
        "excluded": [
            {
                "provider": e.provider,
                "model": e.model,
                "connection_id": e.connection_id,
                "rung": e.rung.label if e.rung is not None else None,
                "reason": e.reason.value,
                "detail": e.detail,
            }
            for e in decision.excluded
        ],
        "next_change_at": decision.next_change_at,
        "budget_left_usd": {
            "cheap": _usd(decision.budget_left_usd[0]),
            "premium": _usd(decision.budget_left_usd[1]),
        },
        "valid_until": decision.valid_until,
    }


def _usd(value: Any) -> float | None:
    return None if value is None else float(value)


# The fields of an answer its tag leaves out (see the module's docstring), and the
# exclusions' field likewise.
UNTAGGED_FIELDS = ("computed_at", "valid_until")
UNTAGGED_EXCLUSION_FIELDS = ("detail",)
# Hex digits of the sha256 kept in a tag: 128 bits.
TAG_HEX_DIGITS = 32


def decision_tag(out: dict[str, Any]) -> str:
    """The `ETag` of a decision in the contract's shape (`decision_out`): a weak tag of a
    digest of its canonical JSON without the untagged fields."""
    content = {key: value for key, value in out.items() if key not in UNTAGGED_FIELDS}
    content["excluded"] = [
        {key: value for key, value in row.items() if key not in UNTAGGED_EXCLUSION_FIELDS}
        for row in out["excluded"]
    ]
    canonical = json.dumps(
        content, cls=NinjaJSONEncoder, sort_keys=True, separators=(",", ":"), ensure_ascii=True
    )
    return f'W/"{hashlib.sha256(canonical.encode()).hexdigest()[:TAG_HEX_DIGITS]}"'


def cache_control(valid_until: datetime | None, now: datetime) -> str:
    """`Cache-Control` of a decision valid until `valid_until`, at `now`: private (it
    answers one token's request), for the whole seconds left, floored, never negative;
    `max-age=0` when it has no such instant (api.md: revalidate, a 304 is cheap)."""
    if valid_until is None:
        return "private, max-age=0"
    left = valid_until - now
    # A timedelta's days and seconds are the floor of its length (microseconds are >= 0).
    return f"private, max-age={max(0, left.days * 86400 + left.seconds)}"


def tag_matches(if_none_match: str, tag: str) -> bool:
    """Whether an `If-None-Match` value names `tag`: `*`, or a list of tags of which one
    is weakly equal to it (RFC 9110 13.1.2: `W/` ignored on both sides)."""
    value = if_none_match.strip()
    if value == "*":
        return True
    opaque = tag[2:] if tag.startswith("W/") else tag
    for listed in value.split(","):
        listed = listed.strip()
        if listed.startswith("W/"):
            listed = listed[2:]
        if listed == opaque:
            return True
    return False


# What the pool endpoints add to their generated operation (ninja merges it in): the
# caching headers of a decision and the 304 of a revalidation (docs/HOT_PATH.md).
_POOL_HEADERS = {
    "ETag": {
        "description": "The decision's version: a weak tag of what it says (not of "
        "computed_at, valid_until or the exclusions' sentences). Same inputs, same tag.",
        "schema": {"type": "string", "example": 'W/"3f9a0c5e7b1d2468ace013579bdf2468"'},
    },
    "Cache-Control": {
        "description": "private, max-age=<whole seconds until valid_until, floored, never "
        "negative>; max-age=0 when valid_until is null.",
        "schema": {"type": "string", "example": "private, max-age=542"},
    },
}
POOL_CACHING_OPENAPI: dict[str, Any] = {
    "responses": {
        # Ints, as ninja keys its responses: the headers merge into its 200 (a string
        # "200" would be a second, duplicate key in the served JSON).
        200: {"headers": _POOL_HEADERS},
        304: {
            "description": "Not Modified: If-None-Match names the current tag (or is *). No body.",
            "headers": _POOL_HEADERS,
        },
    },
}


# A tag from an earlier answer (or a list, or `*`): a 304 when it names the current one.
IfNoneMatch = Annotated[
    str | None,
    Header(
        alias="If-None-Match",
        description="The ETag of an earlier answer (or a list, or *): 304 if it is current.",
    ),
]


def parse_pool_id(auto_id: str) -> AutoId | dict[str, str]:
    """The parsed auto id, or the 404 detail of a bad one."""
    try:
        return parse_auto_id(auto_id)
    except UnknownTier as error:
        return _detail(f"{error}.")
    except InvalidAutoId as error:
        return _detail(f"{error}.")


def observe(parsed: AutoId, decision: Decision, started: float) -> None:
    """Record a served decision and its latency in the metrics."""
    outcome = "empty" if not decision.candidates else "served"
    metrics.DECISIONS.labels(auto_id=metrics.auto_id_label(parsed), outcome=outcome).inc()
    metrics.DECISION_SECONDS.observe(time.perf_counter() - started)


def request_counters(request: HttpRequest) -> tuple[int, int] | None:
    """The change counters read with the token (saves a query per decision)."""
    return getattr(getattr(request, "auth", None), "counters", None)


class Rendered(NamedTuple):
    """A decision's body and tag, computed once per decision object."""

    body: bytes
    tag: str


class PoolAnswer(NamedTuple):
    """What the fast lane sends for a cached decision: the body (None for a 304), its
    tag and its `Cache-Control` at the request's instant."""

    body: bytes | None
    tag: str
    cache_control: str


# Rendered bodies and tags of recent decisions: a cached decision is served as the same
# bytes, so a cache hit does no per-candidate work at all. Keyed by identity, with a weak reference
# to the decision (an id is reused once its object is gone, and the decision cache, not
# this one, decides how long a decision lives). Bounded by count and by bytes: its share
# of DECISION_CACHE_MAX_BYTES, each body accounted as its length plus the entry's own
# objects and its tag (measured with tracemalloc at about 590 bytes, the bytes object's
# header included); a body above the entry size is not kept.
_RENDERED: ByteBoundedLRU[int, tuple[weakref.ref[Decision], Rendered]] = ByteBoundedLRU(256)
RENDERED_ENTRY_BYTES = 600


def rendered_cache_max_bytes() -> int:
    """The byte bound of this process's rendered bodies."""
    return int(settings.DECISION_CACHE_MAX_BYTES * (1 - services.DECISION_CACHE_SHARE))


def rendered_bytes() -> int:
    """The accounted size of this process's rendered bodies."""
    return _RENDERED.accounted_bytes


def rendered(decision: Decision) -> Rendered:
    """The decision's JSON body and tag (the same for the same decision object)."""
    entry = _RENDERED.get(id(decision))
    if entry is not None and entry[0]() is decision:
        return entry[1]
    out = decision_out(decision)
    answer = Rendered(json.dumps(out, cls=NinjaJSONEncoder).encode(), decision_tag(out))
    _RENDERED.put(
        id(decision),
        (weakref.ref(decision), answer),
        len(answer.body) + RENDERED_ENTRY_BYTES,
        rendered_cache_max_bytes(),
    )
    return answer


def decision_response(
    decision: Decision, now: datetime, if_none_match: str | None = None
) -> HttpResponse:
    """The decision as a JSON response with its `ETag` and `Cache-Control` at `now`; a
    `304` with no body when the request's `If-None-Match` names its tag (for a POST
    too: its answer is a read)."""
    body, tag = rendered(decision)
    response: HttpResponse
    if if_none_match is not None and tag_matches(if_none_match, tag):
        response = HttpResponseNotModified()
    else:
        response = HttpResponse(body, content_type="application/json; charset=utf-8")
    response["ETag"] = tag
    response["Cache-Control"] = cache_control(decision.valid_until, now)
    return response


def body_key(content_type: str, body: bytes) -> tuple[str, bytes]:
    """The decision cache key of a pool POST: a digest of its exact body. A gateway sends
    the same pool again and again; a repeated body is then found without validating and
    hashing every candidate again."""
    digest = hashlib.sha256(content_type.encode("latin-1") + b"\0" + body).digest()
    return ("body", digest)


def cached_pool_answer(
    auto_id: str, secret: str, post_key: Any = None, if_none_match: str | None = None
) -> PoolAnswer | None:
    """What the pool endpoint would answer for this auto id and bearer secret (and, for
    a POST, this `body_key`; and this `If-None-Match`), when this process has the
    decision cached for the current change counters: one query (the token and the
    counters), no router, no per-candidate work; the body is None where the endpoint
    answers 304. None when the endpoint must answer instead (a bad id or token, a
    decision not cached yet). Served by omniroute_admin.fast_lane, with the metrics the
    endpoint records."""
    started = time.perf_counter()
    parsed = parse_pool_id(auto_id)
    if not isinstance(parsed, AutoId):
        return None
    now = timezone.now()
    token = authenticate(secret, now=now)
    if token is None or not token.allows(ApiToken.Scope.GATEWAY):
        return None
    decision = services.cached_decision(
        parsed,
        "registered" if post_key is None else post_key,
        now=now,
        counters=token.counters,  # type: ignore[attr-defined]
    )
    if decision is None:
        return None
    return answer_decision(parsed, decision, now, if_none_match, started)


def answer_decision(
    parsed: AutoId, decision: Decision, now: datetime, if_none_match: str | None, started: float
) -> PoolAnswer:
    """A cached decision's answer at `now` (the body None for a `304`), recorded in the
    metrics as the endpoint records it (`started`: the request's perf_counter)."""
    observe(parsed, decision, started)
    body, tag = rendered(decision)
    if if_none_match is not None and tag_matches(if_none_match, tag):
        return PoolAnswer(None, tag, cache_control(decision.valid_until, now))
    return PoolAnswer(body, tag, cache_control(decision.valid_until, now))
