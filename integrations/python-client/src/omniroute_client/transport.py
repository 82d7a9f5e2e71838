"""The pool request on the synchronous HTTP client (keep-alive), its answer and the
circuit breaker around it (`flight.Breaker`), and the blocking calls of registration.

One pool request is sent once more, on a new connection, when its kept-alive connection
was closed under it; a transport failure or a 5xx counts against the breaker and answers
from the fail modes (cache.py). A 200 or a 304 is kept in the cache; a 4xx raises."""

from __future__ import annotations

import time
from typing import Any

import httpx

from .budget import BudgetTracker
from .cache import DecisionCache
from .decisions import (
    Decision,
    Entry,
    NotFound,
    OmniRouteError,
    TokenRejected,
    freshness,
    parse_time,
)
from .flight import Breaker

# A kept-alive connection the control plane closed while idle (gunicorn closes one idle
# for its keep-alive seconds, 2 by default) fails the request sent on it as it closes:
# a pool request (a read) is sent once more, on a new connection, before the control
# plane counts as unreachable (which opens the breaker: auto/subscription fails closed).
CLOSED_UNDER_US = (httpx.RemoteProtocolError, httpx.ReadError, httpx.WriteError)


class PoolRequests(DecisionCache):
    # Set by the client's constructor (client._Base).
    base_url: str
    headers: dict[str, str]
    http: httpx.Client
    breaker: Breaker
    budget: BudgetTracker
    ref_supported: bool
    revalidate_seconds: float

    def _sync_client(self, timeout: float) -> httpx.Client:
        return httpx.Client(base_url=self.base_url, headers=self.headers, timeout=timeout)

    def _request_body(self, candidates: list[dict[str, Any]] | None) -> dict[str, Any] | None:
        if candidates is None:
            return None
        if self.ref_supported:
            return {"candidates": candidates}
        # A server without candidate `ref`: send positions as ids, map them back.
        sent = []
        for index, candidate in enumerate(candidates):
            sent.append({k: v for k, v in candidate.items() if k != "ref"} | {"id": index})
        return {"candidates": sent}

    def _restore_refs(self, body: dict[str, Any], candidates: list[dict[str, Any]] | None) -> None:
        if candidates is None or self.ref_supported:
            return
        for entry in body.get("candidates") or []:
            index = entry.get("id")
            if isinstance(index, int) and 0 <= index < len(candidates):
                entry["ref"] = candidates[index].get("ref")
                entry["id"] = candidates[index].get("id")

    def _is_ref_refusal(self, response: httpx.Response) -> bool:
        return response.status_code == 422 and "ref" in response.text and self.ref_supported

    def _absorb(
        self,
        key: str,
        response: httpx.Response,
        previous: Entry | None,
        generation: int,
        candidates: list[dict[str, Any]] | None,
        sent_at: float,
    ) -> Decision:
        now = self.clock()
        status = response.status_code
        if status == 304 and previous is not None:
            decision = previous.decision
            self.stats["not_modified"] += 1
        elif status == 200:
            body = response.json()
            self._restore_refs(body, candidates)
            # A decision the server kept may predate the request: debits count from the
            # earlier of the two instants (spec: "Budgets under bursts").
            computed_at = parse_time(body.get("computed_at"))
            if computed_at is not None:
                sent_at = min(sent_at, computed_at)
            decision = Decision(body=body, etag=response.headers.get("etag"), sent_at=sent_at)
            self.stats["fetches"] += 1
        elif status == 404:
            raise NotFound(response.text[:500])
        elif status in (401, 403):
            self.stats["token_rejected"] += 1
            raise TokenRejected(f"the control plane rejected the gateway token ({status})")
        elif 400 <= status < 500:
            raise OmniRouteError(f"control plane answered {status}: {response.text[:500]}")
        else:
            raise httpx.HTTPStatusError(f"{status}", request=response.request, response=response)
        until = freshness(
            now=now,
            status=status,
            cache_control=response.headers.get("cache-control"),
            body_valid_until=decision.valid_until,
            feed_live=self.feed_live and not self.blind(now),
            revalidate_seconds=self.revalidate_seconds,
        )
        with self.lock:
            self.entries[key] = Entry(decision, until, now, generation)
        if status == 200:
            self.budget.new_decision(key, decision)
        return decision

    def _fetch_sync(
        self,
        auto_id: str,
        candidates: list[dict[str, Any]] | None,
        *,
        generation: int | None = None,
    ) -> Decision:
        """One pool request on the synchronous HTTP client; the decision is kept under
        `generation` (the current one unless given)."""
        key, previous, current, headers = self._prepare(auto_id, candidates)
        if not self.breaker.allow(self.clock()):
            self.stats["short_circuited"] += 1
            return self._fallback(key, auto_id, None)
        path = f"/pools/{auto_id}"
        sent_at = time.time()
        for attempt in range(2):
            try:
                if candidates is None:
                    response = self.http.get(path, headers=headers)
                else:
                    response = self.http.post(
                        path, json=self._request_body(candidates), headers=headers
                    )
                    if self._is_ref_refusal(response):
                        self.ref_supported = False
                        response = self.http.post(path, json=self._request_body(candidates))
                break
            except CLOSED_UNDER_US as error:
                if attempt:
                    return self._unreachable(key, auto_id, error)
            except httpx.TransportError as error:
                return self._unreachable(key, auto_id, error)
        kept_as = current if generation is None else generation
        return self._answered(key, auto_id, response, previous, kept_as, candidates, sent_at)

    def _unreachable(self, key: str, auto_id: str, error: Exception) -> Decision:
        self.breaker.failure(self.clock())
        return self._fallback(key, auto_id, error)

    def _answered(
        self,
        key: str,
        auto_id: str,
        response: httpx.Response,
        previous: Entry | None,
        generation: int,
        candidates: list[dict[str, Any]] | None,
        sent_at: float,
    ) -> Decision:
        if response.status_code >= 500:
            error = httpx.HTTPStatusError(
                f"{response.status_code}", request=response.request, response=response
            )
            return self._unreachable(key, auto_id, error)
        self.breaker.success()
        return self._absorb(key, response, previous, generation, candidates, sent_at)

    # -- registration (start-up; blocking) --------------------------------------------------

    def call(self, method: str, path: str, body: Any = None) -> httpx.Response:
        response = self.http.request(method, path, json=body)
        if response.status_code in (401, 403):
            self.stats["token_rejected"] += 1
            raise TokenRejected(f"{method} {path}: the control plane rejected the gateway token")
        return response

    def provider_aliases(self) -> dict[str, str] | None:
        """alias -> provider, or None when the server has no alias endpoint (404)."""
        response = self.call("GET", "/provider-aliases")
        if response.status_code == 404:
            return None
        return {row["alias"]: row["provider"] for row in response.json()}
