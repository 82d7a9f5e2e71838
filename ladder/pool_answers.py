"""The pool hot path's answers: a decision in the contract's shape, its rendered body
(cached per decision object) and the cached body the fast lane serves without the
router. Shared by the pool endpoints (ladder.api) and omniroute_admin.fast_lane."""

from __future__ import annotations

import hashlib
import json
import time
import weakref
from typing import Any

from django.conf import settings
from django.http import HttpRequest, HttpResponse
from django.utils import timezone
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
    }


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


# Rendered bodies of recent decisions: a cached decision is served as the same bytes, so
# a cache hit does no per-candidate work at all. Keyed by identity, with a weak reference
# to the decision (an id is reused once its object is gone, and the decision cache, not
# this one, decides how long a decision lives). Bounded by count and by bytes: its share
# of DECISION_CACHE_MAX_BYTES, each body accounted as its length plus the entry's own
# objects (measured at about 350 bytes); a body above the entry size is not kept.
_RENDERED: ByteBoundedLRU[int, tuple[weakref.ref[Decision], bytes]] = ByteBoundedLRU(256)
RENDERED_ENTRY_BYTES = 400


def rendered_cache_max_bytes() -> int:
    """The byte bound of this process's rendered bodies."""
    return int(settings.DECISION_CACHE_MAX_BYTES * (1 - services.DECISION_CACHE_SHARE))


def rendered_bytes() -> int:
    """The accounted size of this process's rendered bodies."""
    return _RENDERED.accounted_bytes


def rendered(decision: Decision) -> bytes:
    """The decision's JSON body (the same bytes for the same decision object)."""
    entry = _RENDERED.get(id(decision))
    if entry is not None and entry[0]() is decision:
        return entry[1]
    body = json.dumps(decision_out(decision), cls=NinjaJSONEncoder).encode()
    _RENDERED.put(
        id(decision),
        (weakref.ref(decision), body),
        len(body) + RENDERED_ENTRY_BYTES,
        rendered_cache_max_bytes(),
    )
    return body


def decision_response(decision: Decision) -> HttpResponse:
    """The decision as a JSON response."""
    return HttpResponse(rendered(decision), content_type="application/json; charset=utf-8")


def body_key(content_type: str, body: bytes) -> tuple[str, bytes]:
    """The decision cache key of a pool POST: a digest of its exact body. A gateway sends
    the same pool again and again; a repeated body is then found without validating and
    hashing every candidate again."""
    digest = hashlib.sha256(content_type.encode("latin-1") + b"\0" + body).digest()
    return ("body", digest)


def cached_pool_body(auto_id: str, secret: str, post_key: Any = None) -> bytes | None:
    """The body the pool endpoint would answer for this auto id and bearer secret (and,
    for a POST, this `body_key`), when this process has the decision cached for the
    current change counters: one query (the token and the counters), no router, no
    per-candidate work. None when the endpoint must answer instead (a bad id or token,
    a decision not cached yet). Served by omniroute_admin.fast_lane, with the metrics
    the endpoint records."""
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
    observe(parsed, decision, started)
    return rendered(decision)
