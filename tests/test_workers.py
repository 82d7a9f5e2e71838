"""The rule and the shared table that balance connections across a master's workers
(omniroute_admin.workers); tests/integration/test_worker_balance.py runs them in a real
gunicorn."""

from __future__ import annotations

import pytest

from omniroute_admin import workers
from omniroute_admin.workers import Balancer, SlotTable, over_share


@pytest.mark.parametrize(
    ("mine", "counts", "expected"),
    [
        (2, [2], False),  # one worker alone never closes
        (2, [2, 0], True),
        (1, [1, 1], False),
        (2, [2, 0, 0], True),  # 2 on 3 workers: a share of 1
        (1, [1, 1, 0], False),
        (16, [16, 0, 0], True),  # 16 on 3: a share of 6
        (7, [7, 5, 4], True),
        (6, [6, 5, 5], False),
        (0, [0, 0], False),
    ],
)
def test_a_worker_is_over_its_share_past_the_total_over_the_workers_rounded_up(
    mine: int, counts: list[int], expected: bool
) -> None:
    assert over_share(mine, counts) is expected


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_slots_are_handed_once_and_a_silent_worker_stops_counting() -> None:
    clock = Clock()
    table = SlotTable(size=3, clock=clock)
    assert [table.claim(), table.claim()] == [0, 1]
    table.publish(0, 4)
    table.publish(1, 2)
    assert table.live_counts() == [4, 2]
    clock.now += workers.STALE_SECONDS - 0.1
    table.publish(1, 3)
    clock.now += 0.2  # slot 0's heartbeat is now older than STALE_SECONDS
    assert table.live_counts() == [3]
    # A slot just handed out is not handed again before its worker's first heartbeat.
    assert table.claim() == 2
    with pytest.raises(RuntimeError, match="more than 3 workers"):
        table.claim()
    clock.now += workers.CLAIM_SECONDS
    table.publish(1, 3)
    # Slot 0 (silent) is free again, its old count cleared; slot 2 never beat.
    assert table.claim() == 0
    assert table.live_counts() == [3]
    table.publish(0, 1)
    assert table.live_counts() == [1, 3]
    table.leave(1)
    assert table.live_counts() == [1]


def test_a_worker_over_its_share_closes_answers_until_it_is_within_it() -> None:
    clock = Clock()
    table = SlotTable(size=4, clock=clock)
    held: set[object] = {object(), object()}
    mine = Balancer(table, table.claim(), held)
    other = Balancer(table, table.claim(), set())
    other.publish()
    assert mine.should_close() is True
    held.pop()
    assert mine.should_close() is False
    other.connections.add(object())
    other.publish()
    assert [mine.should_close(), other.should_close()] == [False, False]
    assert [mine.closed, other.closed] == [1, 0]


def test_answers_keep_their_headers_where_no_worker_balances(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    headers = [(b"content-type", b"application/json")]
    monkeypatch.setattr(workers, "balancer", None)
    assert workers.closing(headers) == headers
    table = SlotTable(size=2, clock=Clock())
    monkeypatch.setattr(workers, "balancer", Balancer(table, table.claim(), {object()}))
    busy = Balancer(table, table.claim(), {object(), object(), object()})
    busy.publish()
    assert workers.closing(headers) == headers
    monkeypatch.setattr(workers, "balancer", busy)
    assert workers.closing(headers) == [*headers, (b"connection", b"close")]
