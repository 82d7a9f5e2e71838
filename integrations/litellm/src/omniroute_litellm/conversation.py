"""The conversation a LiteLLM request belongs to, for soft stickiness
(`omniroute_client.sticky`): read from what LiteLLM and the coding agents already send.

Sources, first match wins: the explicit `omniroute_conversation=` argument (taken out of
the call: it never reaches the upstream); LiteLLM's `metadata` (`omniroute_conversation`,
`conversation_id`, `session_id`, Claude Code's `user_id` JSON); the request's session
header (Claude Code's `x-claude-code-session-id`, the Codex CLI's `session-id` /
`session_id`, `x-session-id`), from `headers` / `extra_headers`, the proxy's
`metadata["headers"]` or `proxy_server_request["headers"]`; OpenAI's `prompt_cache_key`."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from omniroute_client import conversation_key

EXPLICIT = "omniroute_conversation"


def _mapping(value: object) -> Mapping[str, Any] | None:
    return value if isinstance(value, Mapping) else None


def conversation_of(kwargs: dict[str, Any]) -> str | None:
    """The request's conversation key (None: no stickiness); pops the explicit argument."""
    explicit = kwargs.pop(EXPLICIT, None)
    metadata = _mapping(kwargs.get("metadata")) or {}
    headers: dict[str, Any] = {}
    server_request = _mapping(kwargs.get("proxy_server_request")) or {}
    # Later sources override earlier ones for one header name: the call's own last.
    for source in (
        server_request.get("headers"),
        metadata.get("headers"),
        kwargs.get("extra_headers"),
        kwargs.get("headers"),
    ):
        found = _mapping(source)
        if found:
            headers.update(found)
    return conversation_key(
        explicit=explicit,
        metadata=metadata,
        headers=headers,
        prompt_cache_key=kwargs.get("prompt_cache_key"),
    )
