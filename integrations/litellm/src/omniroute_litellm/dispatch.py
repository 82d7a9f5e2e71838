"""The routing both front ends share: `OmniRouteRouter` (a LiteLLM Router of its own) and
`OmniRouteProxyHandler` (the LiteLLM proxy's Router, from its config.yaml).

How a request for `auto/thrifty` runs (the hooks of LiteLLM that work, issue #15):
1. the pool is asked for BEFORE the Router is called (a kept decision: no round trip
   when nothing changed); an empty pool raises `NoCapacity` at once;
2. the Router is called on a hidden model group holding a copy of every OmniRoute
   deployment, with `num_retries` = pool length - 1 and LiteLLM's cooldowns off;
3. before each attempt, `async_filter_deployments` hands out exactly one deployment: the
   next one in the decision's order that this request has not tried yet;
4. the success and failure hooks report events (from the upstream's status and headers)
   and spend to the control plane in the background."""

from __future__ import annotations

import copy
import logging
import threading
import time
import uuid
from typing import Any, cast

import httpx
from litellm.integrations.custom_logger import CustomLogger
from omniroute_client import (
    AsyncOmniRouteClient,
    ControlPlaneUnavailable,
    Decision,
    NotFound,
    OmniRouteError,
    TokenRejected,
)

from .conversation import conversation_of
from .model_list import (
    Candidate,
    Deployment,
    build_candidates,
    catalog_provider,
    dispatch_order,
    pool_candidates,
)

log = logging.getLogger("omniroute_litellm")
PLAN_RUNGS = ("subscription", "keyless")
META = "omniroute"
DISPATCH_PREFIX = "omniroute-dispatch-"
# Plan logins: their deployments carry zero cost, so LiteLLM's own accounting agrees with
# the ledger (a plan request bills nothing).
PLAN_AUTH_TYPES = ("oauth", "subscription")
# Start-up registration with the control plane down: tried again in the background.
REGISTER_RETRY_SECONDS = (1.0, 2.0, 5.0, 10.0, 30.0)
# A request's dispatch state is dropped when it ends; one whose end was never seen (a
# front end that lost it) is dropped after this long.
REQUEST_STATE_TTL_SECONDS = 900.0


class NoCapacity(Exception):
    """No deployment may serve this auto id now. `retry_after`: seconds until the
    control plane expects one back (from `next_change_at`), None when unknown."""

    def __init__(
        self,
        auto_id: str,
        retry_after: float | None,
        decision: Decision | None = None,
        reason: str = "",
    ) -> None:
        self.auto_id = auto_id
        self.retry_after = retry_after
        self.decision = decision
        self.reason = reason
        why = f" ({reason})" if reason else ""
        super().__init__(f"{auto_id}: no capacity{why}; retry after {retry_after} s")


class ControlPlaneDown(NoCapacity):
    """The control plane is unreachable and this auto id may serve nothing without it
    (subscription at once; thrifty past its last decision and any static fallback).
    The proxy answers 503."""


class GatewayTokenRejected(NoCapacity):
    """The control plane rejected the gateway token (401/403): nothing is routed until
    the token is fixed. The proxy answers 503 naming it; counted in the client's
    `metrics()["token_rejected"]`."""


class Dispatcher:
    """The candidates of a model list, the hidden dispatch group's copies, the per-request
    order and tries, and the reports."""

    def __init__(
        self,
        client: AsyncOmniRouteClient,
        model_list: list[dict[str, Any]],
        *,
        register: bool = True,
        static_fallback: list[str] | None = None,
    ) -> None:
        self.client = client
        self.dispatch_group = f"{DISPATCH_PREFIX}{uuid.uuid4().hex[:8]}"
        self.candidates: list[Candidate] = build_candidates(model_list, self.dispatch_group + ":")
        self.deployments: dict[str, Deployment] = {
            d.dispatch_id: d for candidate in self.candidates for d in candidate.deployments
        }
        # Until the control plane has answered: a current server (it has provider aliases).
        self.server_has_aliases = True
        # The server stores providers normalised (trimmed, lower-cased, through its aliases).
        self.aliases: dict[str, str] = {}
        self.pool_body = pool_candidates(self.candidates, self.server_has_aliases)
        self.static_fallback = list(static_fallback or [])
        self._set_static_fallback()
        self.requests: dict[str, dict[str, Any]] = {}
        # (request token, dispatch id) -> the budget ticket of that attempt, until its
        # success or failure is reported (LiteLLM reports after the call has returned).
        self.tickets: dict[tuple[str, str], tuple[str, float]] = {}
        self.registered = threading.Event()
        self._stop = threading.Event()
        self.start_up_error: Exception | None = None
        try:
            self._start_up(register)
        except (httpx.TransportError, OmniRouteError) as error:
            # The control plane is down at start: keep trying in the background; requests
            # meanwhile are served per the fail modes (README, "Failure").
            self.start_up_error = error
            log.warning("omniroute: the control plane is unreachable at start (%s)", error)
            threading.Thread(
                target=self._retry_start_up, args=(register,), name="omniroute-start", daemon=True
            ).start()

    def _start_up(self, register: bool) -> None:
        aliases = self.client.provider_aliases()
        self.server_has_aliases = aliases is not None
        self.aliases = aliases or {}
        self.pool_body = pool_candidates(self.candidates, self.server_has_aliases)
        self._set_static_fallback()
        if register:
            self.register()
        self.start_up_error = None
        self.registered.set()

    def _retry_start_up(self, register: bool) -> None:
        attempt = 0
        while not self._stop.wait(REGISTER_RETRY_SECONDS[min(attempt, 4)]):
            attempt += 1
            try:
                self._start_up(register)
                log.warning("omniroute: registered with the control plane")
                return
            except httpx.TransportError as error:
                self.start_up_error = error
            except OmniRouteError as error:  # a rejected token: still worth retrying
                self.start_up_error = error
                log.error("omniroute: start-up registration failed: %s", error)

    def stop(self) -> None:
        self._stop.set()

    def _set_static_fallback(self) -> None:
        """The operator's static fallback of `auto/thrifty` (connection ids, in order) as
        the client's: served when the control plane is unreachable and the last decision
        is past its validity bound."""
        entries = []
        for connection_id in self.static_fallback:
            for candidate in self.candidates:
                if connection_id in candidate.connection_ids:
                    entries.append(
                        {
                            "ref": candidate.ref,
                            "provider": catalog_provider(
                                candidate.provider, self.server_has_aliases
                            ),
                            "model": candidate.model,
                            "connection_id": connection_id,
                            "rung": None,
                        }
                    )
                    break
            else:
                raise ValueError(f"static_fallback: no deployment names {connection_id!r}")
        if entries:
            self.client.static_fallback["auto/thrifty"] = entries

    def copies(self) -> list[dict[str, Any]]:
        """The hidden dispatch group: a copy of every OmniRoute deployment."""
        twins = []
        for deployment in self.deployments.values():
            twin = copy.deepcopy(deployment.original)
            twin["model_name"] = self.dispatch_group
            # Not listed by the proxy's /v1/models (and refused when called directly).
            twin["model_info"] = {
                **(twin.get("model_info") or {}),
                "id": deployment.dispatch_id,
                "discoverable": False,
            }
            if deployment.auth_type in PLAN_AUTH_TYPES:
                params = twin.setdefault("litellm_params", {})
                params["input_cost_per_token"] = 0.0
                params["output_cost_per_token"] = 0.0
            twins.append(twin)
        return twins

    # -- registration -------------------------------------------------------------------

    def register(self) -> None:
        """Register every connection not registered yet (one already registered keeps its
        stored fields: an operator's registration is never overwritten by a guess) and
        every candidate not registered yet. Idempotent."""
        for deployment in self.deployments.values():
            path = f"/connections/{deployment.connection_id}"
            if self.client.call("GET", path).status_code == 404:
                body = {
                    "provider": catalog_provider(deployment.provider, self.server_has_aliases),
                    "auth_type": deployment.auth_type,
                    "label": f"LiteLLM {deployment.original.get('model_name')}",
                }
                answer = self.client.call("PUT", path, body)
                if answer.status_code >= 400:
                    log.warning(
                        "omniroute: registering %s answered %d",
                        deployment.connection_id,
                        answer.status_code,
                    )
        existing = self.client.call("GET", "/candidates")
        stored = existing.json() if existing.status_code == 200 else []
        for body in self.pool_body:
            if any(same_candidate(row, body, self.aliases) for row in stored):
                continue
            answer = self.client.call("POST", "/candidates", body)
            if answer.status_code == 422 and "ref" in answer.text:  # a server without `ref`
                answer = self.client.call(
                    "POST", "/candidates", {k: v for k, v in body.items() if k != "ref"}
                )
            if answer.status_code >= 400:
                log.warning(
                    "omniroute: registering candidate %s answered %d",
                    body["ref"],
                    answer.status_code,
                )

    # -- the decision and the order -----------------------------------------------------

    async def adecision(self, auto_id: str) -> Decision:
        """The decision of `auto_id` (a kept one: no round trip), on the async client."""
        try:
            return await self.client.pool(auto_id, self.pool_body)
        except ControlPlaneUnavailable as error:
            retry = self.client.breaker.open_seconds or None
            raise ControlPlaneDown(auto_id, retry, reason=str(error)) from error
        except TokenRejected as error:
            raise GatewayTokenRejected(auto_id, None, reason=str(error)) from error
        except NotFound as error:
            raise NoCapacity(auto_id, None, reason=str(error)) from error

    def prepare(self, decision: Decision, kwargs: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        """The Router call's arguments for this decision (an empty pool: `NoCapacity`).
        A budgeted rung this gateway has spent locally since the decision is left out."""
        kwargs = dict(kwargs)
        conversation = conversation_of(kwargs)
        # Soft stickiness (omniroute_client.sticky): the connection this conversation used
        # last goes first in an entry of its rung that still lists it.
        entries = self.client.sticky.prefer(conversation, decision.candidates)
        order = [
            (deployment, rung)
            for deployment, rung in dispatch_order(
                cast(list[dict[str, Any]], entries), self.candidates
            )
            if not self._spent_locally(decision, rung)
        ]
        if not order:
            raise NoCapacity(decision.auto_id, decision.retry_after(self.client.clock()), decision)
        token = uuid.uuid4().hex
        self._prune()
        self.requests[token] = {
            "order": [d.dispatch_id for d, _ in order],
            "tried": set(),
            "at": time.monotonic(),
            "decision": decision,
        }
        metadata = dict(kwargs.get("metadata") or {})
        metadata[META] = {
            "token": token,
            "auto_id": decision.auto_id,
            "rungs": {d.dispatch_id: rung for d, rung in order},
            "conversation": conversation,
        }
        call = {
            **kwargs,
            "metadata": metadata,
            "model": self.dispatch_group,
            "num_retries": len(order) - 1,
        }
        return token, call

    def _spent_locally(self, decision: Decision, rung: str | None) -> bool:
        budget = getattr(self.client, "budget", None)  # a client without budgets: none
        if rung is None or budget is None:
            return False
        left = budget.left(decision, rung)
        if left is None:
            return False
        return left <= 0 or budget.estimate(rung) > left + 1e-9

    def finish(self, token: str | None) -> None:
        self.requests.pop(str(token), None)

    def _prune(self) -> None:
        cutoff = time.monotonic() - REQUEST_STATE_TTL_SECONDS
        for token in [t for t, state in self.requests.items() if state["at"] < cutoff]:
            self.requests.pop(token, None)
        for key in [k for k, (_, at) in self.tickets.items() if at < cutoff]:
            self.client.release(self.tickets.pop(key)[0])

    def next_deployment(
        self, model: str, healthy_deployments: list, request_kwargs: dict | None
    ) -> list:
        """The one deployment of this attempt: the next in the decision's order that this
        request has not tried and LiteLLM holds healthy."""
        if model != self.dispatch_group:
            return healthy_deployments
        state = self.requests.get(str(token_of(request_kwargs)))
        if state is None:
            return []  # a direct call to the dispatch group: refused, never a bypass
        by_id = {(d.get("model_info") or {}).get("id"): d for d in healthy_deployments}
        rungs = ((request_kwargs or {}).get("metadata") or {}).get(META, {}).get("rungs") or {}
        for dispatch_id in state["order"]:
            if dispatch_id in state["tried"]:
                continue
            state["tried"].add(dispatch_id)
            if dispatch_id not in by_id:
                continue
            # The budget under a burst: this attempt's estimate is debited now; a rung
            # the debits have spent is skipped.
            reserve = getattr(self.client, "reserve", None)
            ticket = reserve(state["decision"], rungs.get(dispatch_id)) if reserve else ""
            if ticket is None:
                continue
            token = str(token_of(request_kwargs))
            self.tickets[(token, dispatch_id)] = (ticket, time.monotonic())
            return [by_id[dispatch_id]]
        return []

    # -- reports ------------------------------------------------------------------------

    def deployment_of(self, kwargs: dict) -> tuple[Deployment, dict] | None:
        params = kwargs.get("litellm_params") or {}
        meta = (params.get("metadata") or {}).get(META)
        dispatch_id = (params.get("model_info") or {}).get("id")
        deployment = self.deployments.get(str(dispatch_id))
        if not meta or deployment is None:
            return None
        return deployment, meta

    def on_success(self, kwargs: dict, response: Any) -> None:
        found = self.deployment_of(kwargs)
        if found is None:
            return
        deployment, meta = found
        hidden = getattr(response, "_hidden_params", None) or {}
        raw = hidden.get("additional_headers") or {}
        headers = {
            k.removeprefix("llm_provider-"): str(v)
            for k, v in raw.items()
            if k.startswith("llm_provider-")
        }
        self.client.report_response(deployment.connection_id, 200, headers, model=deployment.model)
        ticket = self._ticket(meta, deployment.dispatch_id)
        usage = getattr(response, "usage", None)
        rung = (meta.get("rungs") or {}).get(deployment.dispatch_id)
        self.client.sticky.remember(meta.get("conversation"), rung, deployment.connection_id)
        cost = kwargs.get("response_cost")
        if rung in PLAN_RUNGS:
            cost = 0.0  # included in the plan: it billed nothing
        elif not cost:
            cost = None  # unknown to LiteLLM: the control plane prices it from its catalog
        self.client.report_spend(
            {
                "request_id": str(kwargs.get("litellm_call_id") or uuid.uuid4().hex),
                "connection_id": deployment.connection_id,
                "provider": catalog_provider(deployment.provider, self.server_has_aliases),
                "model": deployment.model,
                "cost_usd": cost,
                "input_tokens": getattr(usage, "prompt_tokens", None),
                "output_tokens": getattr(usage, "completion_tokens", None),
            },
            may_cross_budget=rung not in (*PLAN_RUNGS, "free"),
            **({"ticket": ticket} if ticket else {}),
        )

    def _ticket(self, meta: dict, dispatch_id: str) -> str | None:
        kept = self.tickets.pop((str(meta.get("token")), dispatch_id), None)
        return kept[0] if kept is not None else None

    def on_failure(self, kwargs: dict) -> None:
        found = self.deployment_of(kwargs)
        if found is None:
            return
        ticket = self._ticket(found[1], found[0].dispatch_id)
        if ticket:
            self.client.release(ticket)
        if kwargs.get("exception") is not None:
            self.client.report_exception(
                found[0].connection_id, kwargs["exception"], model=found[0].model
            )


class DispatchHooks(CustomLogger):
    """The Router callbacks: the per-attempt deployment and the reports."""

    def __init__(self, dispatcher: Dispatcher | None = None) -> None:
        super().__init__()
        self.dispatcher = dispatcher

    async def async_filter_deployments(
        self,
        model: str,
        healthy_deployments: list,
        messages: Any,
        request_kwargs: dict | None = None,
        parent_otel_span: Any = None,
    ) -> list[dict]:
        if self.dispatcher is None:
            return healthy_deployments
        return self.dispatcher.next_deployment(model, healthy_deployments, request_kwargs)

    async def async_log_success_event(
        self, kwargs: dict, response_obj: Any, start_time: Any, end_time: Any
    ) -> None:
        if self.dispatcher is not None:
            self.dispatcher.on_success(kwargs, response_obj)

    async def async_log_failure_event(
        self, kwargs: dict, response_obj: Any, start_time: Any, end_time: Any
    ) -> None:
        if self.dispatcher is not None:
            self.dispatcher.on_failure(kwargs)


def token_of(request_kwargs: dict | None) -> str | None:
    meta = ((request_kwargs or {}).get("metadata") or {}).get(META) or {}
    token = meta.get("token")
    return None if token is None else str(token)


def same_candidate(row: dict[str, Any], body: dict[str, Any], aliases: dict[str, str]) -> bool:
    # A ref names a model group's candidate, not its connections: another model list
    # (another gateway, or this one before its deployments changed) may hold the same
    # ref over other connections, and that one is not this candidate.
    if row.get("ref") is not None and row["ref"] != body["ref"]:
        return False
    return (
        row.get("provider") == normalised(body["provider"], aliases)
        and row.get("model") == body["model"]
        and row.get("connection_id") == body.get("connection_id")
        and (row.get("allowed_connection_ids") or None)
        == (body.get("allowed_connection_ids") or None)
    )


def normalised(provider: str, aliases: dict[str, str]) -> str:
    """A provider id as the server stores it: trimmed, lower-cased, through its aliases."""
    name = provider.strip().lower()
    return aliases.get(name, name)
