"""Soft stickiness in omniroute_client (sticky.py): a conversation is kept on the
connection it used last while that connection stays in its entry's allowed list, dropped
the moment it leaves, never sticky across rungs, in a bounded map with expiry."""

from __future__ import annotations

import json

import pytest
from omniroute_client import OmniRouteClient, StickyConnections, conversation_key

from tests.integrations.conftest import Clock

PLANS = {"rung": "subscription", "allowed_connection_ids": ["max-1", "max-2"], "ref": "p"}
KEYS = {"rung": "premium", "allowed_connection_ids": ["key-a", "key-b"], "ref": "k"}


def _allowed(entries: object) -> list[list[str]]:
    return [list(entry["allowed_connection_ids"]) for entry in entries]  # type: ignore[attr-defined]


def test_a_conversation_is_kept_on_its_last_connection_while_it_is_allowed() -> None:
    sticky = StickyConnections()
    sticky.remember("c1", "subscription", "max-2")

    assert _allowed(sticky.prefer("c1", [PLANS, KEYS])) == [["max-2", "max-1"], ["key-a", "key-b"]]
    assert sticky.order("c1", PLANS) == ["max-2", "max-1"]
    # Another conversation, or none, gets the control plane's order.
    assert _allowed(sticky.prefer("c2", [PLANS])) == [["max-1", "max-2"]]
    assert sticky.prefer(None, [PLANS])[0] is PLANS


def test_the_decision_itself_is_never_changed() -> None:
    sticky = StickyConnections()
    sticky.remember("c1", "subscription", "max-2")

    sticky.prefer("c1", [PLANS])

    assert PLANS["allowed_connection_ids"] == ["max-1", "max-2"]


def test_a_conversation_is_dropped_the_moment_its_connection_leaves_the_list() -> None:
    sticky = StickyConnections()
    sticky.remember("c1", "subscription", "max-2")
    without = {**PLANS, "allowed_connection_ids": ["max-1", "max-3"]}

    assert _allowed(sticky.prefer("c1", [without])) == [["max-1", "max-3"]]
    assert sticky.last("c1") is None
    # Back in the list later: the list's first, as for any new conversation.
    assert _allowed(sticky.prefer("c1", [PLANS])) == [["max-1", "max-2"]]


def test_a_conversation_on_a_paid_rung_goes_back_to_the_plan() -> None:
    sticky = StickyConnections()
    sticky.remember("c1", "premium", "key-b")

    entries = sticky.prefer("c1", [PLANS, KEYS])

    # The plan entry comes first, in its own order; only the paid entry keeps key-b first.
    assert [entry["rung"] for entry in entries] == ["subscription", "premium"]
    assert _allowed(entries) == [["max-1", "max-2"], ["key-b", "key-a"]]


def test_a_connection_remembered_on_one_rung_never_jumps_the_order_of_another() -> None:
    sticky = StickyConnections()
    sticky.remember("c1", "cheap", "key-b")

    assert _allowed(sticky.prefer("c1", [KEYS])) == [["key-a", "key-b"]]
    assert sticky.order("c1", KEYS) == ["key-a", "key-b"]
    assert sticky.last("c1") is None  # its rung lists it nowhere: dropped


def test_order_of_one_entry_keeps_the_record_of_another_rung() -> None:
    sticky = StickyConnections()
    sticky.remember("c1", "subscription", "max-2")

    assert sticky.order("c1", KEYS) == ["key-a", "key-b"]
    assert sticky.last("c1") == ("subscription", "max-2")


def test_a_pinned_entry_is_left_alone() -> None:
    sticky = StickyConnections()
    sticky.remember("c1", "subscription", "max-2")
    pinned = {"rung": "subscription", "connection_id": "max-2", "allowed_connection_ids": None}

    assert sticky.prefer("c1", [pinned])[0] is pinned
    assert sticky.order("c1", pinned) == ["max-2"]


def test_the_map_is_bounded_least_recently_served_first_out() -> None:
    sticky = StickyConnections(max_conversations=3)

    for index in range(5):
        sticky.remember(f"c{index}", "subscription", "max-2")
    sticky.remember("c2", "subscription", "max-1")  # served again: the newest
    sticky.remember("c5", "subscription", "max-2")

    assert len(sticky) == 3
    assert [sticky.last(c) for c in ("c0", "c1", "c3")] == [None, None, None]
    assert sticky.last("c2") == ("subscription", "max-1")
    assert sticky.last("c4") == ("subscription", "max-2")


def test_a_conversation_expires_its_ttl_after_it_was_last_served() -> None:
    clock = Clock(1000.0)
    sticky = StickyConnections(ttl_seconds=60.0, clock=clock)
    sticky.remember("c1", "subscription", "max-2")

    clock.now = 1059.0
    assert sticky.order("c1", PLANS) == ["max-2", "max-1"]
    clock.now = 1060.0
    assert sticky.order("c1", PLANS) == ["max-1", "max-2"]
    assert len(sticky) == 0


def test_expired_conversations_leave_the_map_on_the_next_write() -> None:
    clock = Clock(0.0)
    sticky = StickyConnections(ttl_seconds=10.0, clock=clock)
    for index in range(100):
        sticky.remember(f"c{index}", "subscription", "max-1")

    clock.now = 11.0
    sticky.remember("new", "subscription", "max-1")

    assert len(sticky) == 1


def test_bad_bounds_are_refused() -> None:
    with pytest.raises(ValueError, match="max_conversations"):
        StickyConnections(max_conversations=0)
    with pytest.raises(ValueError, match="ttl_seconds"):
        StickyConnections(ttl_seconds=0)


@pytest.mark.parametrize(
    ("sources", "key"),
    [
        pytest.param({"explicit": "abc"}, "explicit:abc", id="explicit"),
        pytest.param(
            {"explicit": "abc", "metadata": {"conversation_id": "m"}},
            "explicit:abc",
            id="explicit-wins",
        ),
        pytest.param(
            {"metadata": {"omniroute_conversation": "o", "session_id": "s"}},
            "metadata.omniroute_conversation:o",
            id="metadata-own-key-first",
        ),
        pytest.param(
            {"metadata": {"session_id": "s"}, "headers": {"session-id": "h"}},
            "metadata.session_id:s",
            id="metadata-before-headers",
        ),
        pytest.param(
            {"metadata": {"user_id": json.dumps({"device_id": "d", "session_id": "u1"})}},
            "metadata.user_id:u1",
            id="claude-code-user-id-json",
        ),
        pytest.param({"metadata": {"user_id": "plain-user"}}, None, id="plain-user-id-is-no-key"),
        pytest.param(
            {"headers": {"X-Claude-Code-Session-Id": "cc", "session-id": "cx"}},
            "x-claude-code-session-id:cc",
            id="claude-code-header-first",
        ),
        pytest.param({"headers": {"session-id": "cx"}}, "session-id:cx", id="codex-header"),
        pytest.param({"headers": {"session_id": "old"}}, "session_id:old", id="codex-old-header"),
        pytest.param(
            {"headers": {"authorization": "Bearer x"}, "prompt_cache_key": "pk"},
            "prompt_cache_key:pk",
            id="prompt-cache-key-last",
        ),
        pytest.param({"headers": {"session-id": "  "}}, None, id="blank-is-no-key"),
        pytest.param({"metadata": {"conversation_id": {"a": 1}}}, None, id="not-text"),
        pytest.param({}, None, id="nothing"),
    ],
)
def test_conversation_key_reads_the_first_source_that_names_one(
    sources: dict[str, object], key: str | None
) -> None:
    assert conversation_key(**sources) == key  # type: ignore[arg-type]


def test_a_very_long_key_is_cut() -> None:
    assert conversation_key(explicit="x" * 1000) == "explicit:" + "x" * 256


def test_the_client_carries_a_bounded_map_of_its_options() -> None:
    client = OmniRouteClient(
        "http://127.0.0.1:9",
        "omr_x",
        follow_changes=False,
        sticky_conversations=7,
        sticky_ttl_seconds=30.0,
    )
    try:
        assert (client.sticky.max_conversations, client.sticky.ttl_seconds) == (7, 30.0)
    finally:
        client.close()
