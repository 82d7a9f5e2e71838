"""The simulated world: plan windows from the simulated adapter's config, and the
sizing of registered connections. No database."""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal

import pytest

from billing.classify import KEYLESS_VERDICT
from billing.tiers import PriceBook, PriceRow
from ladder.core import CandidateIn, LadderConfig
from ladder.simulator.world import (
    FIVE_HOURS,
    FREE_TIER_REQUESTS_PER_DAY,
    WEEK,
    PlanUnit,
    PlanWindow,
    RegisteredConnection,
    simulated_connections,
    simulated_plan_windows,
)
from tests.ladder.simulator.helpers import (
    CANDIDATES,
    METERED_VERDICT,
    PLAN_VERDICT,
    PRICE_ROWS,
    T0,
)

# --------------------------------------------------------------------------- the world


def test_simulated_plan_windows_read_the_simulated_adapter_config() -> None:
    # given the demo's second Claude plan: 1000 units, 10-minute windows, phase 5 min
    config = {
        "plan_size": 1000,
        "burn_per_minute": 150,
        "window_seconds": 600,
        "phase_seconds": 300,
    }
    # when read, then 1M tokens per 5 h and 10M per week, both half a window late
    assert simulated_plan_windows(config, T0) == (
        PlanWindow("5h", 1_000_000, PlanUnit.TOKENS, FIVE_HOURS, T0 + FIVE_HOURS / 2),
        PlanWindow("weekly", 10_000_000, PlanUnit.TOKENS, WEEK, T0 + WEEK / 2),
    )
    assert simulated_plan_windows({}, T0)[0].size == 1_000_000


@pytest.mark.parametrize(
    "config",
    [
        pytest.param([], id="not-object"),
        pytest.param({"plan_sise": 5}, id="typo"),
        pytest.param({"plan_size": 0}, id="zero"),
        pytest.param({"plan_size": "big"}, id="text"),
    ],
)
def test_simulated_plan_windows_refuse_a_bad_config(config: object) -> None:
    with pytest.raises(ValueError, match="simulated config"):
        simulated_plan_windows(config, T0)


def test_simulated_connections_size_plans_free_tiers_and_paid_keys() -> None:
    # given a simulated plan, a real-endpoint plan, a free tier, a paid key and keyless
    prices = PriceBook([*PRICE_ROWS, PriceRow("groq", "*", Decimal(0), Decimal(0))])
    candidates = (
        *CANDIDATES,
        CandidateIn(3, "groq", "llama", ("coding",), "groq-key", None),
        CandidateIn(4, "claude", "sonnet", (), None, ("plan-2", "ollama")),
    )
    rows = [
        RegisteredConnection(
            "plan-1", "claude", "oauth", PLAN_VERDICT, True, "simulated", {"plan_size": 2}
        ),
        RegisteredConnection("plan-2", "claude", "oauth", PLAN_VERDICT, True, "claude"),
        RegisteredConnection("groq-key", "groq", "apikey", METERED_VERDICT, True, "none"),
        RegisteredConnection("key-1", "openai", "apikey", METERED_VERDICT, False, "none"),
        RegisteredConnection("ollama", "ollama", "none", KEYLESS_VERDICT, True, "none"),
    ]
    # when built
    built = {
        c.connection_id: c
        for c in simulated_connections(rows, candidates, prices, LadderConfig(), T0)
    }
    # then
    assert [w.size for w in built["plan-1"].windows] == [2_000, 20_000]
    assert [w.size for w in built["plan-2"].windows] == [1_000_000, 10_000_000]
    assert built["groq-key"].windows == (
        PlanWindow("daily", FREE_TIER_REQUESTS_PER_DAY, PlanUnit.REQUESTS, timedelta(days=1), T0),
    )
    assert built["key-1"].windows == ()
    assert built["ollama"].windows == ()
    assert [c.is_polled for c in built.values()] == [True, True, False, False, False]
    assert built["key-1"].is_active is False
