"""The LiteLLM proxy server (`litellm --config config.yaml`) routed by OmniRoute.

In config.yaml:

    litellm_settings:
      callbacks: omniroute_litellm.proxy.handler

`handler` reads the control plane from `OMNIROUTE_URL` and `OMNIROUTE_TOKEN` (a gateway
token). For other client options, make your own instance in a module next to
config.yaml (`handler = OmniRouteProxyHandler(control_plane_url=..., token=...,
client_options={...})`) and name that module instead.

The same routing as `OmniRouteRouter` (`dispatch.py`), on the proxy's own Router: on the
first `auto/...` request the handler reads the proxy's model list, registers its
connections and candidates, and adds the hidden dispatch group's copies to the proxy's
Router. Then, per request, `async_pre_call_hook` asks for the pool (a kept decision: no
round trip when nothing changed) and points the request at the dispatch group with
`num_retries` = pool length - 1; `async_filter_deployments` hands out the next
deployment of the decision's order before each attempt; the success and failure hooks
report events and spend. An empty pool is answered 429 with `Retry-After` (seconds until
`next_change_at`, when known) at once: the Router is never called, so no metered
deployment is ever tried for `auto/subscription`. An unreachable control plane (where the
auto id may serve nothing without it) and a rejected gateway token are answered 503;
nothing the handler meets is answered 500. The dispatch group is hidden from the model
listings and refused when asked for directly."""

from __future__ import annotations

import asyncio
import logging
import math
import os
from collections.abc import Sequence
from typing import Any

from omniroute_client import AsyncOmniRouteClient

from .conversation import EXPLICIT
from .dispatch import (
    DISPATCH_PREFIX,
    ControlPlaneDown,
    Dispatcher,
    DispatchHooks,
    GatewayTokenRejected,
    NoCapacity,
    token_of,
)

log = logging.getLogger("omniroute_litellm")
# The call types whose body is a chat request the dispatch group can serve.
ROUTED_CALL_TYPES = ("completion", "acompletion")


class OmniRouteProxyHandler(DispatchHooks):
    """A LiteLLM proxy callback (`litellm_settings.callbacks`) that routes `auto/...`."""

    def __init__(
        self,
        control_plane_url: str | None = None,
        token: str | None = None,
        *,
        client_options: dict[str, Any] | None = None,
        client: AsyncOmniRouteClient | None = None,
        router: Any = None,
        static_fallback: list[str] | None = None,
    ) -> None:
        super().__init__(None)
        self.control_plane_url = control_plane_url
        self.token = token
        self.client_options = client_options or {}
        self.client = client
        self.static_fallback = static_fallback
        self.router = router  # default: the proxy's Router, found on the first request
        self._lock: asyncio.Lock | None = None

    # -- start-up (on the first auto request) ----------------------------------------------

    def _settings(self) -> tuple[str, str]:
        url = self.control_plane_url or os.environ.get("OMNIROUTE_URL")
        token = self.token or os.environ.get("OMNIROUTE_TOKEN")
        if not url or not token:
            raise NoCapacity("auto", None, reason="OMNIROUTE_URL and OMNIROUTE_TOKEN are not set")
        return url, token

    def _build(self, router: Any) -> Dispatcher:
        if self.client is None:
            url, token = self._settings()
            self.client = AsyncOmniRouteClient(url, token, **self.client_options)
        model_list = [_as_dict(d) for d in router.model_list]
        dispatcher = Dispatcher(self.client, model_list, static_fallback=self.static_fallback)
        if not getattr(router, "disable_cooldowns", False):
            log.warning(
                "omniroute: set router_settings.disable_cooldowns: true in config.yaml; "
                "OmniRoute keeps the cooldowns, and LiteLLM's would hold a plan back after "
                "its reset"
            )
        return dispatcher

    async def ready(self) -> Dispatcher:
        """The dispatcher, built on first use; its copies on the proxy's Router."""
        router = self.router or _proxy_router()
        dispatcher = self.dispatcher
        if dispatcher is not None:
            first = next(iter(dispatcher.deployments), None)
            if first is None or router.get_deployment(model_id=first) is not None:
                return dispatcher  # the per-request path: one lookup
        if self._lock is None:
            self._lock = asyncio.Lock()
        async with self._lock:
            if self.dispatcher is None:
                self.dispatcher = await asyncio.to_thread(self._build, router)
            self._ensure_copies(router, self.dispatcher)
            return self.dispatcher

    def _ensure_copies(self, router: Any, dispatcher: Dispatcher) -> None:
        """Add the dispatch group to the Router (again, when a model-list reload of the
        proxy dropped it)."""
        from litellm.types.router import Deployment

        for twin in dispatcher.copies():
            if router.get_deployment(model_id=twin["model_info"]["id"]) is None:
                router.add_deployment(Deployment(**twin))

    # -- per request -----------------------------------------------------------------------

    async def async_pre_call_hook(
        self, user_api_key_dict: Any, cache: Any, data: dict, call_type: str
    ) -> dict:
        model = data.get("model")
        if isinstance(model, str) and model.startswith(DISPATCH_PREFIX):
            raise refused_answer(model)  # the hidden group: never a way around the ladder
        if not (isinstance(model, str) and model.startswith("auto/")):
            return data
        if call_type not in ROUTED_CALL_TYPES:
            return data
        try:
            dispatcher = await self.ready()
            decision = await dispatcher.adecision(model)
            _, call = dispatcher.prepare(decision, data)
        except NoCapacity as error:
            raise no_capacity_answer(error) from error
        except Exception as error:  # never a 500 for the ladder's own failure
            log.exception("omniroute: routing %s failed", model)
            raise no_capacity_answer(ControlPlaneDown(model, None, reason=str(error))) from error
        data.update(call)
        data.pop(EXPLICIT, None)  # a conversation key for stickiness, never for the upstream
        return data

    async def async_filter_listed_models(
        self, user_api_key_dict: Any, model_names: Sequence[str]
    ) -> Sequence[str]:
        """/v1/models and the other listings: the dispatch group is not a model."""
        return [name for name in model_names if not str(name).startswith(DISPATCH_PREFIX)]

    async def async_post_call_success_hook(
        self, data: dict, user_api_key_dict: Any, response: Any
    ) -> Any:
        if self.dispatcher is not None:
            self.dispatcher.finish(token_of(data))
        return response

    async def async_post_call_failure_hook(
        self,
        request_data: dict,
        original_exception: Exception,
        user_api_key_dict: Any,
        traceback_str: str | None = None,
    ) -> None:
        if self.dispatcher is not None:
            self.dispatcher.finish(token_of(request_data))

    async def aclose(self, timeout: float = 10.0) -> bool:
        """Safe shutdown (the proxy's shutdown, after its last request): LiteLLM's queued
        callbacks, then every report (what is left stays in the spool file)."""
        from .router import drain_litellm_callbacks

        await drain_litellm_callbacks(timeout)
        if self.dispatcher is not None:
            self.dispatcher.stop()
        if self.client is None:
            return True
        return await self.client.aclose(timeout)

    def close(self, timeout: float = 10.0) -> bool:
        if self.dispatcher is not None:
            self.dispatcher.stop()
        return self.client.close(timeout) if self.client is not None else True


def no_capacity_answer(error: NoCapacity) -> Exception:
    """An empty pool: 429 with Retry-After (whole seconds, rounded up) when the control
    plane knows when. An unreachable control plane or a rejected gateway token: 503
    (with Retry-After: the breaker's period, for the former)."""
    from fastapi import HTTPException

    headers = {}
    if error.retry_after is not None:
        headers["Retry-After"] = str(max(1, math.ceil(error.retry_after)))
    status = 503 if isinstance(error, (ControlPlaneDown, GatewayTokenRejected)) else 429
    return HTTPException(status_code=status, detail=str(error), headers=headers or None)


def refused_answer(model: str) -> Exception:
    from fastapi import HTTPException

    return HTTPException(
        status_code=400,
        detail=f"{model} is internal to OmniRoute; ask for auto/subscription or auto/thrifty",
    )


def _proxy_router() -> Any:
    from litellm.proxy import proxy_server

    router = proxy_server.llm_router
    if router is None:
        raise NoCapacity("auto", None, reason="the proxy has no model list")
    return router


def _as_dict(deployment: Any) -> dict[str, Any]:
    if isinstance(deployment, dict):
        return deployment
    return dict(deployment.model_dump(exclude_none=True))


handler = OmniRouteProxyHandler()
