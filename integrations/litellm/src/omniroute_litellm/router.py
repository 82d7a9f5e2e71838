"""`OmniRouteRouter`: a LiteLLM Router whose `auto/...` models are routed by OmniRoute.

How a request for `auto/thrifty` runs (the hooks of LiteLLM that work, issue #15):
1. the pool is asked for BEFORE the Router is called (a kept decision: no round trip
   when nothing changed); an empty pool raises `NoCapacity` at once;
2. the Router is called on a hidden model group holding a copy of every OmniRoute
   deployment, with `num_retries` = pool length - 1 and LiteLLM's cooldowns off;
3. before each attempt, `async_filter_deployments` hands out exactly one deployment: the
   next one in the decision's order that this request has not tried yet;
4. the success and failure hooks report events (from the upstream's status and headers)
   and spend to the control plane in the background.
Any other model name goes to the Router untouched."""

from __future__ import annotations

import asyncio
import copy
import logging
import threading
import uuid
from collections.abc import Coroutine
from typing import Any, TypeVar

import litellm
from litellm import Router
from litellm.integrations.custom_logger import CustomLogger
from omniroute_client import ControlPlaneUnavailable, Decision, NotFound, OmniRouteClient

from .model_list import (
    Candidate,
    Deployment,
    build_candidates,
    catalog_provider,
    dispatch_order,
    pool_candidates,
)

log = logging.getLogger("omniroute_litellm")
T = TypeVar("T")
PLAN_RUNGS = ("subscription", "keyless")
_META = "omniroute"
_CALLBACK_LISTS = (
    "callbacks",
    "_async_success_callback",
    "_async_failure_callback",
    "success_callback",
    "failure_callback",
)


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
        why = f" ({reason})" if reason else ""
        super().__init__(f"{auto_id}: no capacity{why}; retry after {retry_after} s")


class _Hooks(CustomLogger):
    """The Router callbacks: the per-attempt deployment and the reports."""

    def __init__(self, owner: OmniRouteRouter) -> None:
        super().__init__()
        self.owner = owner

    async def async_filter_deployments(
        self,
        model: str,
        healthy_deployments: list,
        messages: Any,
        request_kwargs: dict | None = None,
        parent_otel_span: Any = None,
    ) -> list[dict]:
        if model != self.owner.dispatch_group:
            return healthy_deployments
        meta = ((request_kwargs or {}).get("metadata") or {}).get(_META) or {}
        state = self.owner.requests.get(str(meta.get("token")))
        if state is None:
            return healthy_deployments
        for dispatch_id in state["order"]:
            if dispatch_id not in state["tried"]:
                state["tried"].add(dispatch_id)
                return [
                    d
                    for d in healthy_deployments
                    if (d.get("model_info") or {}).get("id") == dispatch_id
                ]
        return []

    def _deployment(self, kwargs: dict) -> tuple[Deployment, dict] | None:
        params = kwargs.get("litellm_params") or {}
        meta = (params.get("metadata") or {}).get(_META)
        dispatch_id = (params.get("model_info") or {}).get("id")
        deployment = self.owner.deployments.get(str(dispatch_id))
        if not meta or deployment is None:
            return None
        return deployment, meta

    async def async_log_success_event(
        self, kwargs: dict, response_obj: Any, start_time: Any, end_time: Any
    ) -> None:
        self.owner.on_success(kwargs, response_obj, self._deployment(kwargs))

    async def async_log_failure_event(
        self, kwargs: dict, response_obj: Any, start_time: Any, end_time: Any
    ) -> None:
        found = self._deployment(kwargs)
        if found is not None and kwargs.get("exception") is not None:
            self.owner.client.report_exception(found[0].connection_id, kwargs["exception"])


class OmniRouteRouter:
    """`OmniRouteRouter(model_list=[...], control_plane_url=..., token=..., **router_kwargs)`.

    Other attributes are those of the wrapped `litellm.Router` (`router.router`)."""

    def __init__(
        self,
        model_list: list[dict[str, Any]],
        control_plane_url: str,
        token: str,
        *,
        client: OmniRouteClient | None = None,
        client_options: dict[str, Any] | None = None,
        register: bool = True,
        **router_kwargs: Any,
    ) -> None:
        self.client = client or OmniRouteClient(control_plane_url, token, **(client_options or {}))
        self.dispatch_group = f"omniroute-dispatch-{uuid.uuid4().hex[:8]}"
        prefix = self.dispatch_group + ":"
        self.candidates: list[Candidate] = build_candidates(model_list, prefix)
        self.deployments: dict[str, Deployment] = {
            d.dispatch_id: d for candidate in self.candidates for d in candidate.deployments
        }
        aliases = self.client.provider_aliases()
        self.server_has_aliases = aliases is not None
        # The server stores providers normalised (trimmed, lower-cased, through its aliases).
        self.aliases: dict[str, str] = aliases or {}
        self.pool_body = pool_candidates(self.candidates, self.server_has_aliases)
        if register:
            self.register()
        copies = []
        for deployment in self.deployments.values():
            twin = copy.deepcopy(deployment.original)
            twin["model_name"] = self.dispatch_group
            twin["model_info"] = {**(twin.get("model_info") or {}), "id": deployment.dispatch_id}
            copies.append(twin)
        router_kwargs["disable_cooldowns"] = True  # OmniRoute keeps the cooldowns
        router_kwargs.setdefault("retry_after", 0)
        self.router = Router(model_list=[*model_list, *copies], **router_kwargs)
        self.requests: dict[str, dict[str, Any]] = {}
        self.hooks = _Hooks(self)
        manager = litellm.logging_callback_manager
        manager.add_litellm_callback(self.hooks)
        manager.add_litellm_async_success_callback(self.hooks)
        manager.add_litellm_async_failure_callback(self.hooks)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._loop_lock = threading.Lock()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.router, name)

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
            if any(self._same_candidate(row, body, self.aliases) for row in stored):
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

    @staticmethod
    def _same_candidate(row: dict[str, Any], body: dict[str, Any], aliases: dict[str, str]) -> bool:
        # A ref names a model group's candidate, not its connections: another model list
        # (another gateway, or this one before its deployments changed) may hold the same
        # ref over other connections, and that one is not this candidate.
        if row.get("ref") is not None and row["ref"] != body["ref"]:
            return False
        return (
            row.get("provider") == _normalised(body["provider"], aliases)
            and row.get("model") == body["model"]
            and row.get("connection_id") == body.get("connection_id")
            and (row.get("allowed_connection_ids") or None)
            == (body.get("allowed_connection_ids") or None)
        )

    # -- routing ------------------------------------------------------------------------

    def _decision(self, auto_id: str) -> Decision:
        try:
            return self.client.pool(auto_id, self.pool_body)
        except ControlPlaneUnavailable as error:
            raise NoCapacity(auto_id, None, reason="control plane unreachable") from error
        except NotFound as error:
            raise NoCapacity(auto_id, None, reason=str(error)) from error

    async def _adecision(self, auto_id: str) -> Decision:
        kept = self.client._fresh(self.client_key(auto_id), self.client.clock())
        if kept is not None:
            return kept  # no round trip, no thread hop
        return await asyncio.to_thread(self._decision, auto_id)

    def client_key(self, auto_id: str) -> str:
        from omniroute_client.decisions import pool_key

        return pool_key(auto_id, self.pool_body)

    def _prepare(self, decision: Decision, kwargs: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        order = dispatch_order(decision.candidates, self.candidates)
        if not order:
            raise NoCapacity(decision.auto_id, decision.retry_after(self.client.clock()), decision)
        token = uuid.uuid4().hex
        self.requests[token] = {"order": [d.dispatch_id for d, _ in order], "tried": set()}
        metadata = dict(kwargs.get("metadata") or {})
        metadata[_META] = {
            "token": token,
            "auto_id": decision.auto_id,
            "rungs": {d.dispatch_id: rung for d, rung in order},
        }
        call = {
            **kwargs,
            "metadata": metadata,
            "model": self.dispatch_group,
            "num_retries": len(order) - 1,
        }
        return token, call

    async def acompletion(self, model: str, messages: list[dict[str, Any]], **kwargs: Any) -> Any:
        if not model.startswith("auto/"):
            return await self.router.acompletion(model=model, messages=messages, **kwargs)
        decision = await self._adecision(model)
        token, call = self._prepare(decision, kwargs)
        try:
            return await self.router.acompletion(messages=messages, **call)
        finally:
            self.requests.pop(token, None)

    def completion(self, model: str, messages: list[dict[str, Any]], **kwargs: Any) -> Any:
        """Synchronous: `auto/...` runs `acompletion` on a private event loop thread."""
        if not model.startswith("auto/"):
            return self.router.completion(model=model, messages=messages, **kwargs)
        return self._run(self.acompletion(model=model, messages=messages, **kwargs))

    def _run(self, coroutine: Coroutine[Any, Any, T]) -> T:
        with self._loop_lock:
            if self._loop is None:
                self._loop = asyncio.new_event_loop()
                threading.Thread(
                    target=self._loop.run_forever, name="omniroute-litellm", daemon=True
                ).start()
        return asyncio.run_coroutine_threadsafe(coroutine, self._loop).result()

    # -- reports ------------------------------------------------------------------------

    def on_success(
        self, kwargs: dict, response: Any, found: tuple[Deployment, dict] | None
    ) -> None:
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
        self.client.report_response(deployment.connection_id, 200, headers)
        usage = getattr(response, "usage", None)
        rung = (meta.get("rungs") or {}).get(deployment.dispatch_id)
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
        )

    def close(self) -> None:
        """Flush the reports and stop the client's threads."""
        for hooks in _CALLBACK_LISTS:
            callbacks = getattr(litellm, hooks, None)
            while isinstance(callbacks, list) and self.hooks in callbacks:
                callbacks.remove(self.hooks)
        self.client.close()
        if self._loop is not None:
            self._loop.call_soon_threadsafe(self._loop.stop)


def _normalised(provider: str, aliases: dict[str, str]) -> str:
    """A provider id as the server stores it: trimmed, lower-cased, through its aliases."""
    name = provider.strip().lower()
    return aliases.get(name, name)
