"""Soft stickiness in the plugin's dispatch (no server): the conversation key read from
what LiteLLM and the agents send, the per-request order it gives, and what a success
remembers. The stickiness itself is omniroute_client.sticky's (tests/integrations)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from omniroute_client import Decision, StickyConnections
from omniroute_litellm.conversation import conversation_of
from omniroute_litellm.dispatch import META, Dispatcher


class StubClient:
    """What Dispatcher reads of the client with registration off."""

    def __init__(self) -> None:
        self.sticky = StickyConnections()
        self.clock = lambda: 0.0
        self.responses: list[str] = []

    def provider_aliases(self) -> dict[str, str]:
        return {}

    def report_response(
        self, connection_id: str, status: int, headers: dict, *, model: str | None = None
    ) -> None:
        self.responses.append(connection_id)

    def report_spend(self, entry: dict, *, may_cross_budget: bool) -> None:
        pass


def _deployment(connection_id: str, auth_type: str) -> dict[str, Any]:
    return {
        "model_name": "sonnet",
        "litellm_params": {"model": "anthropic/claude-sonnet-4", "api_key": connection_id},
        "model_info": {"omniroute_connection_id": connection_id, "omniroute_auth_type": auth_type},
    }


MODEL_LIST = [_deployment("max-1", "oauth"), _deployment("max-2", "oauth")]


def _decision(*plan_ids: str) -> Decision:
    entry = {
        "provider": "anthropic",
        "model": "claude-sonnet-4",
        "rung": "subscription",
        "connection_id": None,
        "allowed_connection_ids": list(plan_ids),
        "ref": "sonnet|anthropic/claude-sonnet-4",
    }
    return Decision({"auto_id": "auto/subscription", "candidates": [entry]}, None)


@pytest.fixture
def dispatcher() -> Dispatcher:
    return Dispatcher(StubClient(), MODEL_LIST, register=False)  # type: ignore[arg-type]


def _connections(dispatcher: Dispatcher, token: str) -> list[str]:
    return [dispatcher.deployments[d].connection_id for d in dispatcher.requests[token]["order"]]


def _serve(dispatcher: Dispatcher, call: dict[str, Any], connection_id: str) -> None:
    """The success hook for the deployment of `connection_id` in this call."""
    dispatch_id = next(
        d.dispatch_id for d in dispatcher.deployments.values() if d.connection_id == connection_id
    )
    kwargs = {
        "litellm_params": {"metadata": call["metadata"], "model_info": {"id": dispatch_id}},
    }
    dispatcher.on_success(kwargs, object())


def test_a_conversation_stays_on_the_seat_that_served_it_while_it_is_allowed(
    dispatcher: Dispatcher,
) -> None:
    first_token, first = dispatcher.prepare(
        _decision("max-1", "max-2"), {"metadata": {"session_id": "s1"}}
    )
    assert _connections(dispatcher, first_token) == ["max-1", "max-2"]
    _serve(dispatcher, first, "max-2")  # max-1 failed this time: max-2 served

    token, _ = dispatcher.prepare(_decision("max-1", "max-2"), {"metadata": {"session_id": "s1"}})
    other, _ = dispatcher.prepare(_decision("max-1", "max-2"), {"metadata": {"session_id": "s2"}})

    assert _connections(dispatcher, token) == ["max-2", "max-1"]
    assert _connections(dispatcher, other) == ["max-1", "max-2"]


def test_the_conversation_falls_through_to_the_lists_first_when_its_seat_leaves(
    dispatcher: Dispatcher,
) -> None:
    _, call = dispatcher.prepare(_decision("max-2", "max-1"), {"omniroute_conversation": "c"})
    _serve(dispatcher, call, "max-2")

    gone, _ = dispatcher.prepare(_decision("max-1"), {"omniroute_conversation": "c"})
    back, _ = dispatcher.prepare(_decision("max-1", "max-2"), {"omniroute_conversation": "c"})

    assert _connections(dispatcher, gone) == ["max-1"]
    assert _connections(dispatcher, back) == ["max-1", "max-2"]


def test_the_explicit_argument_never_reaches_the_upstream(dispatcher: Dispatcher) -> None:
    kwargs = {"omniroute_conversation": "c", "temperature": 0}

    _, call = dispatcher.prepare(_decision("max-1", "max-2"), kwargs)

    assert "omniroute_conversation" not in call
    assert call["temperature"] == 0
    assert call["metadata"][META]["conversation"] == "explicit:c"
    assert kwargs == {"omniroute_conversation": "c", "temperature": 0}  # the caller's own


def test_without_a_key_nothing_is_remembered(dispatcher: Dispatcher) -> None:
    _, call = dispatcher.prepare(_decision("max-1", "max-2"), {})
    _serve(dispatcher, call, "max-2")

    assert len(dispatcher.client.sticky) == 0


@pytest.mark.parametrize(
    ("kwargs", "key"),
    [
        pytest.param({"omniroute_conversation": "e"}, "explicit:e", id="explicit"),
        pytest.param(
            {"metadata": {"conversation_id": "m"}}, "metadata.conversation_id:m", id="metadata"
        ),
        pytest.param(
            {"proxy_server_request": {"headers": {"x-claude-code-session-id": "cc"}}},
            "x-claude-code-session-id:cc",
            id="proxy-request-header",
        ),
        pytest.param(
            {"metadata": {"headers": {"session-id": "cx"}}},
            "session-id:cx",
            id="proxy-metadata-header",
        ),
        pytest.param({"extra_headers": {"Session_Id": "x"}}, "session_id:x", id="extra-headers"),
        pytest.param(
            {"metadata": {"user_id": json.dumps({"session_id": "u"})}},
            "metadata.user_id:u",
            id="anthropic-metadata-user-id",
        ),
        pytest.param({"prompt_cache_key": "pk"}, "prompt_cache_key:pk", id="prompt-cache-key"),
        pytest.param({"metadata": "not a mapping", "headers": ["x"]}, None, id="junk"),
    ],
)
def test_conversation_of_reads_what_litellm_and_the_agents_send(
    kwargs: dict[str, Any], key: str | None
) -> None:
    assert conversation_of(dict(kwargs)) == key
