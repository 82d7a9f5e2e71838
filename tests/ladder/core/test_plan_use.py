"""Plan utilisation's pure rules (ladder/core/plan_use.py): windows grouped per
connection in reset order, used and left shares, windows' worth unused."""

from __future__ import annotations

from datetime import UTC, datetime

from ladder.core.plan_use import WindowUse, plan_uses


def _at(hour: int) -> datetime:
    return datetime(2026, 11, 29, hour, tzinfo=UTC)


def test_windows_are_grouped_by_connection_in_reset_order() -> None:
    uses = plan_uses(
        [
            WindowUse("max-2", _at(10), 0.0, 3),
            WindowUse("max-1", _at(10), 50.0, 2),
            WindowUse("max-1", _at(5), 25.0, 4),
        ]
    )

    assert [(u.connection_id, [w.reset_at.hour for w in u.windows]) for u in uses] == [
        ("max-1", [5, 10]),
        ("max-2", [10]),
    ]


def test_a_connections_average_used_and_left_and_windows_unused() -> None:
    (use,) = plan_uses([WindowUse("max-1", _at(5), 25.0, 4), WindowUse("max-1", _at(10), 75.0, 1)])

    assert (use.resets, use.mean_used_percent, use.mean_left_percent) == (2, 50.0, 50.0)
    assert use.unused_windows == 1.0  # a quarter and three quarters left: one window
    assert (use.last.reset_at, use.last.used_percent) == (_at(10), 25.0)


def test_no_windows_no_connections() -> None:
    assert plan_uses([]) == []
