"""`OmniRouteRouter`: a LiteLLM Router whose `auto/...` models are routed by OmniRoute.

The routing itself is `dispatch.Dispatcher` (shared with the proxy's handler, `proxy.py`);
this is the Router of your own process around it. Any other model name goes to the
Router untouched."""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

import litellm
from litellm import Router
from omniroute_client import AsyncOmniRouteClient

from .dispatch import Dispatcher, DispatchHooks, NoCapacity

T = TypeVar("T")
log = logging.getLogger("omniroute_litellm")
_CALLBACK_LISTS = (
    "callbacks",
    "_async_success_callback",
    "_async_failure_callback",
    "success_callback",
    "failure_callback",
)

__all__ = ["NoCapacity", "OmniRouteRouter"]


class OmniRouteRouter:
    """`OmniRouteRouter(model_list=[...], control_plane_url=..., token=..., **router_kwargs)`.

    Other attributes are those of the wrapped `litellm.Router` (`router.router`)."""

    def __init__(
        self,
        model_list: list[dict[str, Any]],
        control_plane_url: str,
        token: str,
        *,
        client: AsyncOmniRouteClient | None = None,
        client_options: dict[str, Any] | None = None,
        register: bool = True,
        static_fallback: list[str] | None = None,
        **router_kwargs: Any,
    ) -> None:
        self.client = client or AsyncOmniRouteClient(
            control_plane_url, token, **(client_options or {})
        )
        self.dispatcher = Dispatcher(
            self.client, model_list, register=register, static_fallback=static_fallback
        )
        self.dispatch_group = self.dispatcher.dispatch_group
        self.candidates = self.dispatcher.candidates
        self.deployments = self.dispatcher.deployments
        self.server_has_aliases = self.dispatcher.server_has_aliases
        self.pool_body = self.dispatcher.pool_body
        self.requests = self.dispatcher.requests
        router_kwargs["disable_cooldowns"] = True  # OmniRoute keeps the cooldowns
        router_kwargs.setdefault("retry_after", 0)
        self.router = Router(model_list=[*model_list, *self.dispatcher.copies()], **router_kwargs)
        self.hooks = DispatchHooks(self.dispatcher)
        manager = litellm.logging_callback_manager
        manager.add_litellm_callback(self.hooks)
        manager.add_litellm_async_success_callback(self.hooks)
        manager.add_litellm_async_failure_callback(self.hooks)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._closed: bool | None = None  # what the first close answered
        self._loop_lock = threading.Lock()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.router, name)

    def register(self) -> None:
        """Register the model list's connections and candidates (see `Dispatcher.register`)."""
        self.dispatcher.register()

    async def acompletion(self, model: str, messages: list[dict[str, Any]], **kwargs: Any) -> Any:
        if not model.startswith("auto/"):
            return await self.router.acompletion(model=model, messages=messages, **kwargs)
        decision = await self.dispatcher.adecision(model)
        token, call = self.dispatcher.prepare(decision, kwargs)
        try:
            return await self.router.acompletion(messages=messages, **call)
        finally:
            self.dispatcher.finish(token)

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

    async def aclose(self, timeout: float = 10.0) -> bool:
        """Safe shutdown, after the last request has returned: wait for the success and
        failure callbacks LiteLLM has not run yet (its logging worker), then send every
        report (at most `timeout` seconds; what is left stays in the spool file). True
        when everything was acknowledged. Closing again answers the same, and does nothing."""
        if self._closed is not None:
            return self._closed
        await drain_litellm_callbacks(timeout)
        remove_callbacks(self.hooks)
        self.dispatcher.stop()
        drained = await self.client.aclose(timeout)
        if self._loop is not None:
            self._loop.call_soon_threadsafe(self._loop.stop)
        self._closed = drained
        return drained

    def close(self, timeout: float = 10.0) -> bool:
        """`aclose` from synchronous code (not from inside a running event loop: there,
        `await router.aclose()`)."""
        if self._closed is not None:
            return self._closed
        if self._loop is not None:
            future = asyncio.run_coroutine_threadsafe(drain_litellm_callbacks(timeout), self._loop)
            future.result(timeout + 1)
        else:
            try:
                asyncio.get_running_loop()
            except RuntimeError:
                asyncio.run(drain_litellm_callbacks(timeout))
        remove_callbacks(self.hooks)
        self.dispatcher.stop()
        drained = self.client.close(timeout)
        if self._loop is not None:
            self._loop.call_soon_threadsafe(self._loop.stop)
        self._closed = drained
        return drained


async def drain_litellm_callbacks(timeout: float) -> None:
    """Wait (at most `timeout` s) for LiteLLM's queued logging callbacks: the success and
    failure hooks that report spend and events run there after a response returned."""
    try:
        from litellm.litellm_core_utils.logging_worker import GLOBAL_LOGGING_WORKER
    except ImportError:  # an older LiteLLM runs them as tasks of their own
        return
    try:
        await asyncio.wait_for(GLOBAL_LOGGING_WORKER.flush(), timeout)
    except (TimeoutError, RuntimeError) as error:
        log.warning("omniroute: LiteLLM's callbacks not drained: %s", error)


def remove_callbacks(hooks: object) -> None:
    for name in _CALLBACK_LISTS:
        callbacks = getattr(litellm, name, None)
        while isinstance(callbacks, list) and hooks in callbacks:
            callbacks.remove(hooks)
