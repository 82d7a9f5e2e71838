"""Two plan seats behind one model group, on the real LiteLLM Router and the real
OmniRoute server: the seat whose window resets soonest serves first, and a conversation
key keeps a conversation on its seat (a fake prompt cache counts hits per account and
conversation) when the order of preference moves under it while both seats stay allowed.
Subscription never reaches the metered key."""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import UTC, datetime
from itertools import pairwise
from typing import Any

import pytest
from omniroute_litellm import OmniRouteRouter
from scenario import MESSAGES, PREMIUM
from server import OmniRouteServer, wait_for
from upstreams import FakeUpstream

pytestmark = pytest.mark.integration
HOUR = 3600.0
SEATS = ("late", "soon")  # listed in this order: the seat resetting later first
CONVERSATIONS = 10
TURNS = 6


@pytest.fixture
def upstreams() -> Iterator[dict[str, FakeUpstream]]:
    now = time.time()
    made = {
        "late": FakeUpstream("anthropic", fixed_reset=now + 6 * 24 * HOUR),
        "soon": FakeUpstream("anthropic", fixed_reset=now + 19 * HOUR),
        "key": FakeUpstream("anthropic"),
    }
    yield made
    for upstream in made.values():
        upstream.stop()


def _deployment(up: FakeUpstream, connection_id: str, auth_type: str) -> dict[str, Any]:
    return {
        "model_name": "sonnet",
        "litellm_params": {
            "model": f"anthropic/{PREMIUM[0]}",
            "api_key": connection_id,
            "api_base": up.base_url,
        },
        "model_info": {"omniroute_connection_id": connection_id, "omniroute_auth_type": auth_type},
    }


def _read(omniroute: OmniRouteServer, connection_id: str, reset: float, left: float) -> None:
    body = {
        "remaining_percent": left,
        "reset_at": datetime.fromtimestamp(reset, UTC).isoformat(),
    }
    answer = omniroute.api("POST", f"/connections/{connection_id}/readings", body)
    assert answer.status_code in (200, 201), answer.text


def _first_seat(router: OmniRouteRouter) -> str:
    entry = router._run(router.dispatcher.adecision("auto/subscription")).candidates[0]
    return str(entry["allowed_connection_ids"][0])


def _conversation_run(
    omniroute: OmniRouteServer,
    router: OmniRouteRouter,
    up: dict[str, FakeUpstream],
    tag: str,
    *,
    keys: bool,
) -> list[list[str]]:
    """TURNS turns of CONVERSATIONS interleaved conversations; halfway, the soon seat's
    window rolls over (its reset moves past the late seat's): the order of preference
    flips while both seats stay allowed. Each conversation's accounts, turn by turn."""
    served: list[list[str]] = [[] for _ in range(CONVERSATIONS)]
    for turn in range(TURNS):
        if turn == TURNS // 2:
            # The run's own reports (header readings of the old window) land first: the
            # operator's reading below is then the newest the server holds.
            assert router.client.flush()
            up["soon"].fixed_reset = time.time() + 7 * 24 * HOUR
            _read(omniroute, f"{tag}-soon", up["soon"].fixed_reset, 40.0)
            wait_for(lambda: _first_seat(router) == f"{tag}-late", what="the order to flip")
        for conversation in range(CONVERSATIONS):
            name = f"{tag}-{conversation}"
            before = {seat: len(up[seat].conversations) for seat in up}
            extra: dict[str, Any] = {"omniroute_conversation": name} if keys else {}
            router.completion(
                model="auto/subscription",
                messages=MESSAGES,
                extra_headers={"x-test-conversation": name},
                **extra,
            )
            (account,) = [seat for seat in up if len(up[seat].conversations) > before[seat]]
            served[conversation].append(account)
    return served


def _switches(served: list[list[str]]) -> tuple[int, int]:
    pairs = [(a, b) for turns in served for a, b in pairwise(turns)]
    return sum(a != b for a, b in pairs), len(pairs)


def _cache_hits(served: list[list[str]]) -> int:
    # A turn hits the prompt cache when its account served this conversation before.
    return sum(turns[i] in turns[:i] for turns in served for i in range(1, len(turns)))


def _setup(omniroute: OmniRouteServer, up: dict[str, FakeUpstream], tag: str) -> OmniRouteRouter:
    models = [
        _deployment(up["late"], f"{tag}-late", "oauth"),
        _deployment(up["soon"], f"{tag}-soon", "oauth"),
        _deployment(up["key"], f"{tag}-key", "apikey"),
    ]
    router = OmniRouteRouter(
        model_list=models, control_plane_url=omniroute.base_url, token=omniroute.gateway_token
    )
    _read(omniroute, f"{tag}-late", up["late"].fixed_reset or 0, 90.0)
    _read(omniroute, f"{tag}-soon", up["soon"].fixed_reset or 0, 40.0)
    wait_for(lambda: _first_seat(router) == f"{tag}-soon", what="the soon seat first")
    return router


def test_the_soonest_resetting_seat_serves_first(
    omniroute: OmniRouteServer, upstreams: dict[str, FakeUpstream]
) -> None:
    router = _setup(omniroute, upstreams, "f")
    try:
        entry = router._run(router.dispatcher.adecision("auto/subscription")).candidates[0]
        assert entry["allowed_connection_ids"] == ["f-soon", "f-late"]
        for _ in range(3):
            router.completion(model="auto/subscription", messages=MESSAGES)
        served = {seat: up.served_count() for seat, up in upstreams.items()}
        assert served == {"late": 0, "soon": 3, "key": 0}
    finally:
        router.close()


def test_conversation_keys_keep_conversations_on_their_seat_when_the_order_moves(
    omniroute: OmniRouteServer, upstreams: dict[str, FakeUpstream]
) -> None:
    router = _setup(omniroute, upstreams, "k")
    try:
        without = _conversation_run(omniroute, router, upstreams, "k", keys=False)
        assert router.client.flush()  # as above: the operator's reading is the newest
        upstreams["soon"].fixed_reset = time.time() + 19 * HOUR
        _read(omniroute, "k-soon", upstreams["soon"].fixed_reset, 40.0)
        wait_for(lambda: _first_seat(router) == "k-soon", what="the soon seat first again")
        with_keys = _conversation_run(omniroute, router, upstreams, "k", keys=True)
    finally:
        router.close()

    switched, pairs = _switches(without)
    switched_with_keys, pairs_with_keys = _switches(with_keys)
    print(
        f"consecutive turns switching account: without keys {switched}/{pairs} "
        f"({100 * switched / pairs:.0f} %), with keys {switched_with_keys}/{pairs_with_keys} "
        f"({100 * switched_with_keys / pairs_with_keys:.0f} %); prompt cache hits "
        f"{_cache_hits(without)} and {_cache_hits(with_keys)} of {pairs}"
    )
    # Without keys every conversation follows the flip once; with keys none moves.
    # Without keys every conversation follows the order: at least one switch each at the
    # flip (the figure is reported, not a target); with keys none switches.
    assert pairs == CONVERSATIONS * (TURNS - 1)
    assert switched >= CONVERSATIONS
    assert switched_with_keys <= pairs_with_keys // 10
    assert switched_with_keys == 0
    assert _cache_hits(with_keys) == pairs_with_keys
    assert all(turns == ["soon"] * TURNS for turns in with_keys)
    assert upstreams["key"].served_count() == 0  # subscription never reaches the key
