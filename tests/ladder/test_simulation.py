"""The simulator's pure core: accounting on tiny hand-checked traces, the trace parser,
the synthetic trace and the report writers. No database."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest

from billing.classify import KEYLESS_VERDICT, Billing, BillingVerdict, Overage
from billing.tiers import PriceBook, PriceRow
from ladder.core import CandidateIn, LadderConfig, Rung
from ladder.simulation import (
    FIVE_HOURS,
    FREE_TIER_REQUESTS_PER_DAY,
    WEEK,
    PlanUnit,
    PlanWindow,
    Policy,
    PolicyResult,
    RegisteredConnection,
    Request,
    Selection,
    SimConnection,
    Trace,
    TraceError,
    TrafficModel,
    World,
    default_selections,
    parse_trace_csv,
    simulate,
    simulate_all,
    simulated_connections,
    simulated_plan_windows,
    synthetic_trace,
)
from ladder.simulation_report import (
    CSV_COLUMNS,
    TABLE_HEADER,
    ReportContext,
    format_csv,
    format_table,
    render_html,
)

T0 = datetime(2025, 6, 2, tzinfo=UTC)  # a Monday
PLAN_VERDICT = BillingVerdict(Billing.SUBSCRIPTION, Overage.HARD_STOP, "plan", 1)
METERED_VERDICT = BillingVerdict(Billing.METERED, Overage.METERS_TO_PAID, "key", 2)
CODING = Selection(category="coding")
# The metered key's model: $1 in / $2 out per million tokens, so a 1000 in / 500 out
# request costs exactly 0.002 USD (and $1 is the cheap rung's upper bound).
PRICE_ROWS = (
    PriceRow("claude", "sonnet", Decimal("3"), Decimal("15")),
    PriceRow("openai", "mini", Decimal("1"), Decimal("2")),
)
PRICES = PriceBook(PRICE_ROWS)
ONE_REQUEST_USD = Decimal("0.002")
CANDIDATES = (
    CandidateIn(1, "claude", "sonnet", ("coding",), "plan-1", None),
    CandidateIn(2, "openai", "mini", ("coding",), "key-1", None),
)


def plan(*windows: PlanWindow, is_polled: bool = True, **fields: object) -> SimConnection:
    """The plan connection: a Claude login whose only window holds 5 requests per 5 h."""
    return SimConnection(
        "plan-1",
        "claude",
        "oauth",
        PLAN_VERDICT,
        is_polled=is_polled,
        windows=windows or (PlanWindow("5h", 5, PlanUnit.REQUESTS, FIVE_HOURS, T0),),
        **fields,  # type: ignore[arg-type]
    )


KEY = SimConnection("key-1", "openai", "apikey", METERED_VERDICT)


def world(*connections: SimConnection, config: LadderConfig | None = None) -> World:
    return World(connections or (plan(), KEY), CANDIDATES, PRICES, config or LadderConfig())


def request(at: timedelta, *, input_tokens: int = 1000, output_tokens: int = 500) -> Request:
    return Request(T0 + at, CODING, input_tokens, output_tokens)


def trace(*requests: Request, hours: float = 6) -> Trace:
    return Trace(T0, T0 + timedelta(hours=hours), tuple(requests), source="test")


H = timedelta(hours=1)
S = timedelta(seconds=1)
# Ten requests: five fill the plan, one lands on it exhausted before any poll has seen
# it (a 429 and a fall-through), one waits near the reset, three come after the reset
# at 5 h (the second reset refresh is due at 5 h + 1.5 s).
TINY_TRACE = trace(
    request(H),
    request(H + 60 * S),
    request(H + 120 * S),
    request(H + 180 * S),
    request(H + 240 * S),
    request(H + 290 * S),
    request(5 * H - 30 * S),
    request(5 * H + 1 * S),
    request(5 * H + 60 * S),
    request(5 * H + 240 * S),
)


@pytest.mark.parametrize(
    ("policy", "spend", "refused", "paid", "paid_with_headroom", "attempts_429", "flips", "lags"),
    [
        # Plan for 1-5, the 429 at 1h+290s falls through to the key, the key again near
        # the reset; the passed reset admits the plan at once (fails open), so 8-10 go
        # back to it.
        pytest.param(Policy.THRIFTY, 2, 0, 2, 0, 1, 2, (0.0,), id="thrifty"),
        # The 429 has nowhere to fall; near the reset the plan is exhausted; at 5h+1s
        # the reading's reset has passed but nothing verifies it yet: refused, not paid.
        pytest.param(Policy.SUBSCRIPTION_ONLY, 0, 3, 0, 0, 1, 0, (0.0,), id="subscription"),
        # The plan login priced as metered at $3/$15 loses to the $1/$2 key every time,
        # though the plan sits full the whole trace.
        pytest.param(Policy.CHEAPEST_FIRST, 10, 0, 10, 10, 0, 0, (), id="cheapest-first"),
        # The cache (filled at 1h+180s: 40 % left) still admits the plan at 1h+290s; the
        # cache refilled at 5h-30s says EXHAUSTED until it expires at 5h+150s, so 8 and
        # 9 are paid while the plan is full again; 10 returns to the plan.
        pytest.param(Policy.ORIGINAL_DESIGN, 4, 0, 4, 2, 1, 2, (60.0,), id="original"),
    ],
)
def test_tiny_trace_accounting_is_exact(
    policy: Policy,
    spend: int,
    refused: int,
    paid: int,
    paid_with_headroom: int,
    attempts_429: int,
    flips: int,
    lags: tuple[float, ...],
) -> None:
    # given one 5-request plan, a 0.002 USD metered key and ten requests across a reset
    # when the trace is replayed
    result = simulate(world(), TINY_TRACE, policy)
    # then every number is the hand-checked one
    assert result.requests == 10
    assert result.spend_usd == ONE_REQUEST_USD * spend
    assert result.refused == refused
    assert result.paid_requests == paid
    assert result.paid_while_plan_had_headroom == paid_with_headroom
    assert result.paid_while_plan_in_band == 0
    assert result.failed_attempts == attempts_429
    assert result.rung_flips == flips
    assert result.rung_flips_per_hour == pytest.approx(flips / 6)
    assert result.paid_seconds_after_resets == lags


def test_tiny_trace_serving_connections_per_policy() -> None:
    # given the tiny trace, when every policy replays it
    results = {r.policy: r for r in simulate_all(world(), TINY_TRACE)}
    # then each request landed where the hand check says
    served = {
        policy: "".join(
            "-" if o.connection_id is None else o.connection_id[0] for o in result.outcomes
        )
        for policy, result in results.items()
    }
    assert served == {
        Policy.THRIFTY: "ppppp" + "kk" + "ppp",
        Policy.SUBSCRIPTION_ONLY: "ppppp" + "---" + "pp",
        Policy.CHEAPEST_FIRST: "k" * 10,
        Policy.ORIGINAL_DESIGN: "ppppp" + "kkkk" + "p",
    }
    assert results[Policy.THRIFTY].served_by_rung == (8, 0, 0, 2, 0)


def test_original_design_lags_after_a_reset_where_thrifty_does_not() -> None:
    # given the tiny trace, whose plan resets at 5 h with traffic waiting
    # when thrifty and the original design replay it
    thrifty = simulate(world(), TINY_TRACE, Policy.THRIFTY)
    original = simulate(world(), TINY_TRACE, Policy.ORIGINAL_DESIGN)
    # then thrifty is back on the plan with the first request after the reset, while the
    # original keeps paying until its cached EXHAUSTED reading expires
    after_reset = slice(7, 10)
    assert [o.rung for o in thrifty.outcomes[after_reset]] == [Rung.SUBSCRIPTION] * 3
    assert [o.rung for o in original.outcomes[after_reset]] == [
        Rung.CHEAP,
        Rung.CHEAP,
        Rung.SUBSCRIPTION,
    ]
    assert thrifty.max_paid_seconds_after_reset == 0.0
    assert original.max_paid_seconds_after_reset == 60.0


def test_subscription_only_refuses_instead_of_paying() -> None:
    # given the tiny trace, when auto/subscription replays it
    result = simulate(world(), TINY_TRACE, Policy.SUBSCRIPTION_ONLY)
    # then nothing is billed and the requests the plan could not take are refused
    assert result.spend_usd == 0
    assert result.paid_requests == 0
    assert [o.at for o in result.outcomes if o.rung is None] == [
        T0 + H + 290 * S,
        T0 + 5 * H - 30 * S,
        T0 + 5 * H + 1 * S,
    ]


def test_thrifty_enforces_the_cheap_budget_then_refuses() -> None:
    # given a cheap budget of exactly one request
    config = LadderConfig(cheap_budget_usd=ONE_REQUEST_USD)
    # when thrifty replays the tiny trace
    result = simulate(world(config=config), TINY_TRACE, Policy.THRIFTY)
    # then the 429's fall-through spends it and the next request finds the rung gated
    assert result.spend_usd == ONE_REQUEST_USD
    assert result.refused == 1
    assert result.outcomes[6].rung is None


def test_cheapest_first_ignores_budgets() -> None:
    # given a cheap budget of one request
    config = LadderConfig(cheap_budget_usd=ONE_REQUEST_USD)
    # when the cost sort replays the tiny trace
    result = simulate(world(config=config), TINY_TRACE, Policy.CHEAPEST_FIRST)
    # then it pays for every request anyway
    assert result.spend_usd == ONE_REQUEST_USD * 10
    assert result.refused == 0


def test_a_plan_that_meters_to_paid_keeps_serving_and_bills_its_overage() -> None:
    # given a plan whose overage meters to paid and no other connection
    overage = BillingVerdict(Billing.SUBSCRIPTION, Overage.METERS_TO_PAID, "devin", 3)
    only_plan = replace(plan(is_polled=False), billing=overage)
    requests = tuple(request(H + n * 60 * S) for n in range(7))
    # when thrifty replays seven requests against its 5-request window
    result = simulate(world(only_plan, KEY), trace(*requests), Policy.THRIFTY)
    # then the plan serves all seven and the two past the window bill sonnet's price
    sonnet_request = (Decimal(3) * 1000 + Decimal(15) * 500) / Decimal(1_000_000)
    assert [o.connection_id for o in result.outcomes] == ["plan-1"] * 7
    assert result.spend_usd == sonnet_request * 2
    assert result.paid_requests == 0


def test_original_design_unclamped_cooldown_keeps_the_plan_out_past_its_reset() -> None:
    # given an unpolled plan of one request whose window resets at 5 h, and 429s piling
    # up before the reset (backoff 5, 10, 20, 40 s for the original: the last runs to
    # 5h+10s, past the reset)
    reset = 5 * H
    requests = trace(
        request(reset - 600 * S),
        request(reset - 100 * S),
        request(reset - 90 * S),
        request(reset - 60 * S),
        request(reset - 30 * S),
        request(reset + 5 * S),
    )
    one_request_plan = plan(PlanWindow("5h", 1, PlanUnit.REQUESTS, FIVE_HOURS, T0), is_polled=False)
    # when thrifty and the original replay it
    thrifty = simulate(world(one_request_plan, KEY), requests, Policy.THRIFTY)
    original = simulate(world(one_request_plan, KEY), requests, Policy.ORIGINAL_DESIGN)
    # then thrifty's one 429 stores an EXHAUSTED reading until the reset and takes the
    # plan back at 5h+5s; the original retries on every expiry and is still cooling down
    assert thrifty.failed_attempts == 1
    assert thrifty.outcomes[-1].connection_id == "plan-1"
    assert original.failed_attempts == 4
    assert original.outcomes[-1].connection_id == "key-1"
    assert original.paid_while_plan_had_headroom == 1
    assert original.paid_seconds_after_resets == (5.0,)


def test_original_design_without_hysteresis_readmits_a_plan_inside_the_band() -> None:
    # given a plan whose weekly window is left at 4 % once its 5-hour window resets:
    # between the exit cutoff (2 %) and the re-entry floor (5 %)
    windows = (
        PlanWindow("5h", 960, PlanUnit.TOKENS, FIVE_HOURS, T0),
        PlanWindow("weekly", 1000, PlanUnit.TOKENS, WEEK, T0),
    )
    requests = trace(
        request(H, input_tokens=900, output_tokens=60),
        request(5 * H + 600 * S, input_tokens=5, output_tokens=5),
    )
    # when thrifty and the original replay it
    thrifty = simulate(world(plan(*windows), KEY), requests, Policy.THRIFTY)
    original = simulate(world(plan(*windows), KEY), requests, Policy.ORIGINAL_DESIGN)
    # then thrifty keeps the dropped-out plan out until it refills past the floor (and
    # pays while 4 % sits unused), while the original, in play forever, uses the sliver
    assert thrifty.outcomes[1].connection_id == "key-1"
    assert (thrifty.paid_while_plan_had_headroom, thrifty.paid_while_plan_in_band) == (0, 1)
    assert original.outcomes[1].connection_id == "plan-1"
    # and a reset that leaves the plan inside the band is not a return to the plan
    assert thrifty.resets == 0


def test_rung_flips_count_changes_within_a_selection_only() -> None:
    # given alternating requests for two models that always serve from different rungs
    requests = tuple(
        Request(
            T0 + n * 60 * S,
            Selection(provider="openai", model="mini")
            if n % 2
            else Selection(provider="claude", model="sonnet"),
            1000,
            500,
        )
        for n in range(4)
    )
    # when thrifty replays them
    result = simulate(world(), trace(*requests, hours=1), Policy.THRIFTY)
    # then no selection ever changed rung: no flips
    assert [o.rung for o in result.outcomes] == [Rung.SUBSCRIPTION, Rung.CHEAP] * 2
    assert result.rung_flips == 0


def test_an_empty_trace_gives_empty_results() -> None:
    # given no requests, when thrifty replays them
    result = simulate(world(), trace(hours=0), Policy.THRIFTY)
    # then nothing happened and the rates are zero, not a division error
    assert (result.requests, result.spend_usd, result.rung_flips_per_hour) == (0, 0, 0.0)
    assert result.median_paid_seconds_after_reset is None


# --------------------------------------------------------------------------- CSV traces

HEADER = "timestamp,provider,model,input_tokens,output_tokens\n"


def test_parse_trace_csv_reads_models_categories_and_the_flat_id_in_time_order() -> None:
    # given rows out of order: a named model, a category, any candidate (naive = UTC)
    text = (
        HEADER
        + "2025-06-02T10:00:05Z,,coding,2000,300\n"
        + "2025-06-02T10:00:00+02:00,claude,sonnet,1000,500\n"
        + "\n"
        + "2025-06-02T11:00:00,,,10,1\n"
    )
    # when parsed
    parsed = parse_trace_csv(text, CANDIDATES)
    # then
    assert parsed.requests == (
        Request(
            datetime(2025, 6, 2, 8, tzinfo=UTC), Selection(None, "claude", "sonnet"), 1000, 500
        ),
        Request(datetime(2025, 6, 2, 10, 0, 5, tzinfo=UTC), Selection("coding"), 2000, 300),
        Request(datetime(2025, 6, 2, 11, tzinfo=UTC), Selection(), 10, 1),
    )
    assert (parsed.start, parsed.end, parsed.source) == (
        datetime(2025, 6, 2, 8, tzinfo=UTC),
        datetime(2025, 6, 2, 11, tzinfo=UTC),
        "csv",
    )


@pytest.mark.parametrize(
    ("text", "line", "message"),
    [
        pytest.param("", 1, "the file is empty", id="empty"),
        pytest.param(HEADER, 1, "no requests", id="header-only"),
        pytest.param("timestamp,model\n", 1, "lacks provider, input_tokens", id="columns"),
        pytest.param(HEADER + "yesterday,,,1,1\n", 2, "not an ISO 8601", id="timestamp"),
        pytest.param(
            HEADER + "2025-06-02T10:00:00Z,,,1,1\n2025-06-02T10:00:00Z,,,-5,1\n",
            3,
            "input_tokens is -5",
            id="negative",
        ),
        pytest.param(HEADER + "2025-06-02T10:00:00Z,,,1,1.5\n", 2, "not a whole", id="float"),
        pytest.param(HEADER + "2025-06-02T10:00:00Z,,,1\n", 2, "expected 5 columns", id="short"),
        pytest.param(
            HEADER + "2025-06-02T10:00:00Z,openai,gpt-9,1,1\n", 2, "openai/gpt-9", id="model"
        ),
        pytest.param(
            HEADER + "2025-06-02T10:00:00Z,,poetry,1,1\n", 2, "known: coding", id="category"
        ),
        pytest.param(
            HEADER + "2025-06-02T10:00:00Z,openai,,1,1\n", 2, "without a model", id="no-model"
        ),
    ],
)
def test_parse_trace_csv_names_the_bad_line(text: str, line: int, message: str) -> None:
    # given a bad file, when parsed, then the error names the line and the problem
    with pytest.raises(TraceError) as caught:
        parse_trace_csv(text, CANDIDATES)
    assert caught.value.line == line
    assert message in str(caught.value)
    assert str(caught.value).startswith(f"line {line}: ")


# --------------------------------------------------------------------------- synthetic


def test_synthetic_trace_is_deterministic_for_a_seed() -> None:
    # given the same inputs, when generated twice, then the traces are equal
    mix = default_selections(CANDIDATES)
    model = TrafficModel(days=2, requests_per_weekday=500)
    first = synthetic_trace(T0, mix, model, seed=3)
    assert first == synthetic_trace(T0, mix, model, seed=3)
    assert first != synthetic_trace(T0, mix, model, seed=4)


def test_synthetic_trace_is_diurnal_weekly_and_realistically_sized() -> None:
    # given a week at 4000 requests per weekday
    result = synthetic_trace(T0, default_selections(CANDIDATES), TrafficModel(), seed=8)
    requests = result.requests
    # then the volume is about 5 x 4000 + 2 x 1400, in order, within the week
    assert 21_500 < len(requests) < 24_000
    assert [r.at for r in requests] == sorted(r.at for r in requests)
    assert (result.start, result.end) == (T0, T0 + 7 * timedelta(days=1))
    # afternoons are far busier than nights, weekdays than weekends
    by_hour = [0] * 24
    for r in requests:
        by_hour[r.at.hour] += 1
    assert by_hour[14] > 10 * by_hour[3]
    saturday = sum(1 for r in requests if r.at.weekday() == 5)
    monday = sum(1 for r in requests if r.at.weekday() == 0)
    assert saturday < monday / 2
    # token sizes: inputs mostly 2k-20k, outputs mostly 200-2k
    inputs = sorted(r.input_tokens for r in requests)
    outputs = sorted(r.output_tokens for r in requests)
    decile = len(requests) // 10
    assert (inputs[decile] > 2_000, inputs[-decile] < 20_000) == (True, True)
    assert (outputs[decile] > 200, outputs[-decile] < 2_000) == (True, True)


def test_default_selections_weight_categories_by_candidate_count() -> None:
    # given two coding candidates (one also chat), then coding weighs twice chat
    candidates = (*CANDIDATES, CandidateIn(3, "x", "y", ("chat",), "k", None))
    assert default_selections(candidates) == (
        (Selection("chat"), 1.0),
        (Selection("coding"), 2.0),
    )
    assert default_selections([replace(CANDIDATES[0], categories=())]) == ((Selection(), 1.0),)


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


# --------------------------------------------------------------------------- writers


def _results() -> tuple[PolicyResult, ...]:
    return simulate_all(world(), TINY_TRACE)


def test_format_table_has_the_header_and_a_row_per_policy() -> None:
    lines = format_table(_results()).splitlines()
    assert lines[0].split("  ")[0] == "policy"
    for column in TABLE_HEADER:
        assert column in lines[0]
    assert [line.split()[0] for line in lines[2:]] == [p.value for p in Policy]
    assert lines[2].split()[1:4] == ["0.00", "0", "2"]


def test_format_csv_has_the_columns_and_exact_spend() -> None:
    rows = [line.split(",") for line in format_csv(_results()).splitlines()]
    assert tuple(rows[0]) == CSV_COLUMNS
    thrifty = dict(zip(CSV_COLUMNS, rows[1], strict=True))
    assert thrifty["policy"] == "thrifty"
    assert thrifty["paid_spend_usd"] == "0.00400000"
    assert thrifty["refused"] == "0"
    assert thrifty["served_subscription"] == "8"
    assert dict(zip(CSV_COLUMNS, rows[3], strict=True))["paid_seconds_after_reset_max"] == ""


def test_render_html_is_self_contained_with_both_charts() -> None:
    context = ReportContext(TINY_TRACE, world().connections, LadderConfig(), {"seed": "8"})
    html = render_html(_results(), context)
    assert html.startswith("<!doctype html>")
    assert html.count("<svg") == 1 + len(Policy)  # the spend chart and a rung strip each
    assert "Cumulative paid spend" in html
    assert "Serving rung over time" in html
    for external in ("<script", "<link", "<img", "http:", "https:", "url("):
        assert external not in html
