"""A pure replay of a traffic trace against simulated providers, one run per routing policy.

No django, no clock, no IO: the shell (`manage.py simulate`) hands in the world (the
connections with their plan windows, the candidates, the price book and the frozen
`LadderConfig`) and a trace; every run advances its own simulated clock from request to
request and calls the real pure core (`core.decide`, `core.apply_event`,
`core.hysteresis_after`) exactly as the product's shell would at those instants.

The policies compared (`Policy`):

- `thrifty`: this product's `auto/thrifty` (or `auto/<category>:thrifty`). Readings come
  from the product's poller: a poll when the latest reading is `min(refresh interval,
  max_state_age - 30 s)` old, on beat ticks, plus one at every reading's reset instant
  + grace; a `quota_exhausted` event stores an EXHAUSTED reading with the upstream's
  reset instant; hysteresis is stored with every reading; cooldowns are clamped to the
  reset; rung budgets are enforced from the simulated spend ledger.
- `subscription-only`: this product's `auto/subscription`, with the same machinery. It
  fails closed: a request with no verified plan connection is refused, never billed.
- `cheapest-first`: a plain cost sort that ignores plans, quota and budgets: every
  (candidate, connection) pair is priced as metered at its model's price for this
  request's tokens (a plan login of a $3 model costs $3 here, deliberately: that is what
  a strategy blind to billing classes sees) and tried cheapest first, ties in the
  scorer's order. It keeps the gateway's own mechanics (fall-through on failure,
  cooldowns, clamped like this product's), so only the ordering differs from thrifty.
- `original-design`: thrifty as the original system ran it: readings seen only through a
  180 s cache (filled on demand, trusted until it expires, with no notion of a reset
  instant: a reset is noticed when the cache next refills), cooldowns not clamped to the
  reset, hysteresis not wired (every connection always in play), and no EXHAUSTED
  reading stored on a 429. Budgets are enforced as for thrifty, so the comparison
  isolates the return-to-plan mechanics.

Ground truth lives in the simulated providers: a connection's plan windows (e.g. a
5-hour and a weekly window, sized in requests or tokens) fill with the requests routed
to it and empty at each window boundary. A request landing on a connection with a full
window is refused with a 429 naming the instant it serves again, and the gateway falls
through to the next connection of the pool within the same request (ladder.md). A plan
whose overage meters to paid keeps serving past its plan and bills the model's price.
"""

from __future__ import annotations

import csv
import heapq
import io
import math
import random
import statistics
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from enum import StrEnum
from typing import Final

from billing.classify import UNCURATED_VERDICT, Billing, BillingVerdict, Overage
from billing.tiers import PriceBook, Tier
from ladder import core
from ladder.core import (
    CandidateIn,
    ConnectionView,
    Hysteresis,
    LadderConfig,
    QuotaStatus,
    Reading,
    Rung,
    RungSpend,
)

PAID_RUNGS: Final = (Rung.CHEAP, Rung.PREMIUM)
_MICROSECOND: Final = timedelta(microseconds=1)
_ZERO: Final = Decimal(0)

# --------------------------------------------------------------------------- policies


class Policy(StrEnum):
    """The routing policies a trace is replayed under."""

    THRIFTY = "thrifty"
    SUBSCRIPTION_ONLY = "subscription-only"
    CHEAPEST_FIRST = "cheapest-first"
    ORIGINAL_DESIGN = "original-design"

    @property
    def summary(self) -> str:
        """One sentence on what the policy does."""
        return _POLICY_SUMMARY[self]


_POLICY_SUMMARY: Final[dict[Policy, str]] = {
    Policy.THRIFTY: (
        "This product's auto/thrifty: plan first, then one rung at a time, readings "
        "refreshed at each reset, cooldowns clamped, hysteresis, budgets enforced."
    ),
    Policy.SUBSCRIPTION_ONLY: (
        "This product's auto/subscription: verified plan quota only; refuses rather than pays."
    ),
    Policy.CHEAPEST_FIRST: (
        "Every connection priced as metered at its model's price, cheapest first; "
        "ignores plans, quota readings and budgets."
    ),
    Policy.ORIGINAL_DESIGN: (
        "Thrifty as the original system ran it: readings through a 180 s cache with no "
        "notion of a reset, cooldowns not clamped, hysteresis not wired."
    ),
}

ALL_POLICIES: Final = tuple(Policy)

# --------------------------------------------------------------------------- the trace


@dataclass(frozen=True, slots=True)
class Selection:
    """What a request asks for: a named model, a category, or any candidate (flat id)."""

    category: str | None = None
    provider: str | None = None
    model: str | None = None

    def __post_init__(self) -> None:
        if (self.provider is None) != (self.model is None):
            raise ValueError("a named model needs both provider and model")
        if self.model is not None and self.category is not None:
            raise ValueError("a request names a model or a category, not both")

    @property
    def label(self) -> str:
        """How the selection reads in a report: `claude/claude-sonnet-4-5`, `coding`, `any`."""
        if self.model is not None:
            return f"{self.provider}/{self.model}"
        return self.category or "any"

    def matches(self, candidate: CandidateIn) -> bool:
        """Whether a candidate can serve this selection."""
        if self.model is not None:
            return candidate.provider == self.provider and candidate.model == self.model
        return self.category is None or self.category in candidate.categories


@dataclass(frozen=True, slots=True)
class Request:
    """One request of a trace."""

    at: datetime
    selection: Selection
    input_tokens: int
    output_tokens: int


@dataclass(frozen=True, slots=True)
class Trace:
    """Requests in time order over [start, end]; `source` says where they came from."""

    start: datetime
    end: datetime
    requests: tuple[Request, ...]
    source: str

    @property
    def hours(self) -> float:
        """The span of the trace in hours."""
        return (self.end - self.start).total_seconds() / 3600.0


class TraceError(ValueError):
    """A trace file row that cannot be simulated; `line` is 1-based (the header is 1)."""

    def __init__(self, line: int, message: str) -> None:
        self.line = line
        self.message = message
        super().__init__(f"line {line}: {message}")


TRACE_COLUMNS: Final = ("timestamp", "provider", "model", "input_tokens", "output_tokens")


def parse_trace_csv(text: str, candidates: Sequence[CandidateIn]) -> Trace:
    """Parse an operator's CSV trace; TraceError names the first bad line.

    Columns (a header row, any order, extra columns ignored): `timestamp` (ISO 8601; no
    offset means UTC), `provider`, `model`, `input_tokens`, `output_tokens`. A row with a
    provider names a model that some candidate serves; a row with an empty provider
    puts a category in `model` (empty: any candidate, the flat auto id). Rows are
    sorted by timestamp (stable).
    """
    reader = csv.reader(io.StringIO(text))
    header = next(reader, None)
    if header is None:
        raise TraceError(1, "the file is empty: expected a header row " + ",".join(TRACE_COLUMNS))
    names = [name.strip().lower() for name in header]
    missing = [column for column in TRACE_COLUMNS if column not in names]
    if missing:
        raise TraceError(
            1,
            f"the header lacks {', '.join(missing)}; expected the columns "
            + ",".join(TRACE_COLUMNS),
        )
    index = {column: names.index(column) for column in TRACE_COLUMNS}
    models = {(c.provider, c.model) for c in candidates}
    categories = sorted({category for c in candidates for category in c.categories})
    requests: list[Request] = []
    for row in reader:
        line = reader.line_num
        if not any(cell.strip() for cell in row):
            continue
        if len(row) < len(names):
            raise TraceError(line, f"expected {len(names)} columns, found {len(row)}")
        cell = {column: row[position].strip() for column, position in index.items()}
        at = _parse_instant(cell["timestamp"], line)
        provider, model = cell["provider"], cell["model"]
        if provider:
            if not model:
                raise TraceError(line, f"provider {provider!r} is given without a model")
            if (provider, model) not in models:
                raise TraceError(line, f"no candidate serves the model {provider}/{model}")
            selection = Selection(provider=provider, model=model)
        elif model:
            if model not in categories:
                known = ", ".join(categories) or "none"
                raise TraceError(line, f"no candidate has the category {model!r} (known: {known})")
            selection = Selection(category=model)
        else:
            selection = Selection()
        requests.append(
            Request(
                at=at,
                selection=selection,
                input_tokens=_parse_tokens(cell["input_tokens"], "input_tokens", line),
                output_tokens=_parse_tokens(cell["output_tokens"], "output_tokens", line),
            )
        )
    if not requests:
        raise TraceError(1, "the file has a header but no requests")
    requests.sort(key=lambda request: request.at)
    return Trace(requests[0].at, requests[-1].at, tuple(requests), source="csv")


def _parse_instant(value: str, line: int) -> datetime:
    try:
        at = datetime.fromisoformat(value)
    except ValueError:
        raise TraceError(line, f"timestamp {value!r} is not an ISO 8601 instant") from None
    if at.utcoffset() is None:
        return at.replace(tzinfo=UTC)
    return at.astimezone(UTC)


def _parse_tokens(value: str, column: str, line: int) -> int:
    try:
        tokens = int(value)
    except ValueError:
        raise TraceError(line, f"{column} {value!r} is not a whole number") from None
    if tokens < 0:
        raise TraceError(line, f"{column} is {tokens}, must be >= 0")
    return tokens


# Requests per hour of the day (UTC), relative: a team working roughly 08:00-18:00
# with a lunch dip, and a thin tail of batch jobs overnight.
HOURLY_PROFILE: Final = (
    0.10, 0.07, 0.05, 0.05, 0.05, 0.07, 0.15, 0.35, 0.70, 0.95, 1.00, 0.95,
    0.75, 0.85, 1.00, 1.00, 0.90, 0.70, 0.45, 0.35, 0.30, 0.25, 0.18, 0.13,
)  # fmt: skip


@dataclass(frozen=True, slots=True)
class TrafficModel:
    """The synthetic trace: a diurnal Poisson arrival rate and lognormal token sizes."""

    days: int = 7
    requests_per_weekday: int = 4000
    weekend_factor: float = 0.35
    input_median_tokens: int = 6000
    output_median_tokens: int = 600
    # Lognormal spread: sigma 0.6 puts 90 % of inputs within about 2.2k-16k tokens
    # around the 6k median, and outputs within about 220-1.6k around 600.
    token_sigma: float = 0.6
    max_tokens: int = 200_000

    def __post_init__(self) -> None:
        if self.days < 1:
            raise ValueError(f"days must be >= 1, got {self.days}")
        if self.requests_per_weekday < 0:
            raise ValueError(f"requests_per_weekday must be >= 0, got {self.requests_per_weekday}")
        if not self.weekend_factor >= 0:
            raise ValueError(f"weekend_factor must be >= 0, got {self.weekend_factor}")


def default_selections(candidates: Sequence[CandidateIn]) -> tuple[tuple[Selection, float], ...]:
    """The synthetic traffic mix: each category weighted by how many candidates list it
    (the flat id alone when no candidate has a category)."""
    counts: dict[str, int] = {}
    for candidate in candidates:
        for category in candidate.categories:
            counts[category] = counts.get(category, 0) + 1
    if not counts:
        return ((Selection(), 1.0),)
    return tuple((Selection(category=name), float(counts[name])) for name in sorted(counts))


def synthetic_trace(
    start: datetime,
    selections: Sequence[tuple[Selection, float]],
    model: TrafficModel,
    seed: int,
) -> Trace:
    """A deterministic synthetic trace: the same inputs and seed give the same requests."""
    if not selections or sum(weight for _, weight in selections) <= 0:
        raise ValueError("the traffic mix needs at least one selection with a positive weight")
    rng = random.Random(seed)
    choices = [selection for selection, _ in selections]
    cumulative: list[float] = []
    total = 0.0
    for _, weight in selections:
        total += weight
        cumulative.append(total)
    profile_sum = sum(HOURLY_PROFILE)
    requests: list[Request] = []
    hour = timedelta(hours=1)
    for day in range(model.days):
        day_start = start + timedelta(days=day)
        day_factor = model.weekend_factor if day_start.weekday() >= 5 else 1.0
        for hour_index, weight in enumerate(HOURLY_PROFILE):
            hour_start = day_start + hour * hour_index
            per_second = model.requests_per_weekday * day_factor * weight / profile_sum / 3600.0
            if per_second <= 0:
                continue
            # A homogeneous Poisson process within the hour: exponential gaps.
            offset = rng.expovariate(per_second)
            while offset < 3600.0:
                selection = choices[_bisect(cumulative, rng.random() * total)]
                requests.append(
                    Request(
                        at=hour_start + timedelta(seconds=round(offset, 3)),
                        selection=selection,
                        input_tokens=_lognormal(rng, model.input_median_tokens, model),
                        output_tokens=_lognormal(rng, model.output_median_tokens, model),
                    )
                )
                offset += rng.expovariate(per_second)
    end = start + timedelta(days=model.days)
    return Trace(start, end, tuple(requests), source="synthetic")


def _bisect(cumulative: Sequence[float], value: float) -> int:
    low, high = 0, len(cumulative) - 1
    while low < high:
        middle = (low + high) // 2
        if cumulative[middle] <= value:
            low = middle + 1
        else:
            high = middle
    return low


def _lognormal(rng: random.Random, median: int, model: TrafficModel) -> int:
    value = rng.lognormvariate(math.log(median), model.token_sigma)
    return max(1, min(model.max_tokens, round(value)))


# --------------------------------------------------------------------------- the world


class PlanUnit(StrEnum):
    """What a plan window counts."""

    REQUESTS = "requests"
    TOKENS = "tokens"  # input + output


@dataclass(frozen=True, slots=True)
class PlanWindow:
    """One usage window of a simulated provider: `size` units per `length`, restarting at
    `anchor + k * length`."""

    name: str
    size: int
    unit: PlanUnit
    length: timedelta
    anchor: datetime

    def __post_init__(self) -> None:
        if self.size < 1:
            raise ValueError(f"window {self.name!r}: size must be >= 1, got {self.size}")
        if self.length <= timedelta(0):
            raise ValueError(f"window {self.name!r}: length must be positive")

    def units(self, request: Request) -> int:
        """What one request consumes of this window."""
        if self.unit == PlanUnit.REQUESTS:
            return 1
        return request.input_tokens + request.output_tokens


@dataclass(frozen=True, slots=True)
class SimConnection:
    """A connection of the simulated world; no windows means it never runs out."""

    connection_id: str
    provider: str
    auth_type: str | None
    billing: BillingVerdict
    is_active: bool = True
    is_polled: bool = False
    windows: tuple[PlanWindow, ...] = ()

    @property
    def is_plan(self) -> bool:
        """A subscription plan connection (rung 0)."""
        return self.billing.billing == Billing.SUBSCRIPTION

    @property
    def bills_past_plan(self) -> bool:
        """A plan whose overage meters to paid keeps serving past its windows, billed."""
        return self.is_plan and self.billing.overage == Overage.METERS_TO_PAID

    @property
    def is_billed(self) -> bool:
        """Metered and uncurated connections bill every request at the model's price."""
        return self.billing.billing in (Billing.METERED, Billing.UNKNOWN)


@dataclass(frozen=True, slots=True)
class World:
    """Everything a run needs besides the trace and the timing."""

    connections: tuple[SimConnection, ...]
    candidates: tuple[CandidateIn, ...]
    prices: PriceBook
    config: LadderConfig

    def connection_map(self) -> dict[str, SimConnection]:
        """Connections by id, with every id a candidate names but nobody registered as
        uncurated (metered) and unlimited, as the product's shell treats it."""
        by_id = {connection.connection_id: connection for connection in self.connections}
        for candidate in self.candidates:
            for connection_id in candidate.connection_ids:
                if connection_id not in by_id:
                    by_id[connection_id] = SimConnection(
                        connection_id, candidate.provider, None, UNCURATED_VERDICT
                    )
        return by_id


@dataclass(frozen=True, slots=True)
class Timing:
    """The product's refresh timing (settings) and the original design's cache TTL."""

    refresh_interval_seconds: float = 180.0
    beat_seconds: float = 10.0
    reset_grace_seconds: float = 1.5
    original_cache_ttl_seconds: float = 180.0

    def due_age(self, config: LadderConfig) -> timedelta:
        """The age at which the beat polls a reading again (`core.due_age`, as the due scan)."""
        return core.due_age(
            timedelta(seconds=self.refresh_interval_seconds),
            timedelta(seconds=config.max_state_age_seconds),
        )


# Plan sizes. The simulated adapter's `plan_size` is unitless; the simulator reads it as
# thousands of tokens per 5-hour window, so its default of 1000 is 1M tokens: about 125
# requests of the synthetic trace's typical size, within the range plan vendors publish
# as messages per 5 hours. Plans polled from a real usage endpoint publish no size, so
# they get that same default.
FIVE_HOURS: Final = timedelta(hours=5)
WEEK: Final = timedelta(days=7)
DAY: Final = timedelta(days=1)
TOKENS_PER_PLAN_UNIT: Final = 1000
DEFAULT_PLAN_TOKENS_PER_FIVE_HOURS: Final = 1_000_000
# A weekly cap worth ten full 5-hour windows: a plan used flat out through every working
# day runs into its week before the week ends, as heavy users of Claude and Codex plans do.
WEEKLY_WINDOWS_PER_WEEK: Final = 10
# A metered connection whose models are all free is a free tier: a daily request cap.
FREE_TIER_REQUESTS_PER_DAY: Final = 1000
_SIMULATED_KEYS: Final = frozenset(
    {"plan_size", "burn_per_minute", "window_seconds", "phase_seconds", "epoch"}
)


def plan_windows(
    start: datetime,
    *,
    tokens_per_five_hours: int = DEFAULT_PLAN_TOKENS_PER_FIVE_HOURS,
    phase_fraction: float = 0.0,
) -> tuple[PlanWindow, ...]:
    """A plan's 5-hour and weekly token windows, both shifted by `phase_fraction` of
    their length after `start`."""
    fraction = phase_fraction % 1.0
    return (
        PlanWindow(
            "5h", tokens_per_five_hours, PlanUnit.TOKENS, FIVE_HOURS, start + FIVE_HOURS * fraction
        ),
        PlanWindow(
            "weekly",
            tokens_per_five_hours * WEEKLY_WINDOWS_PER_WEEK,
            PlanUnit.TOKENS,
            WEEK,
            start + WEEK * fraction,
        ),
    )


def simulated_plan_windows(config: object, start: datetime) -> tuple[PlanWindow, ...]:
    """The windows of a plan polled through the `simulated` adapter, from its JSON config:
    `plan_size` thousands of tokens per 5 hours, and the phase `phase_seconds /
    window_seconds` of a window; `burn_per_minute` is the live demo's own usage and is
    ignored (the trace is the usage here). ValueError for a config the adapter refuses."""
    if not isinstance(config, dict):
        raise ValueError("the simulated config must be a JSON object")
    unknown = sorted(set(config) - _SIMULATED_KEYS)
    if unknown:
        raise ValueError(f"the simulated config has unknown keys: {', '.join(unknown)}")
    plan_size = _config_number(config, "plan_size", 1000.0)
    window_seconds = _config_number(config, "window_seconds", 3600.0)
    phase_seconds = _config_number(config, "phase_seconds", 0.0)
    if plan_size <= 0 or window_seconds < 1:
        raise ValueError("the simulated config needs plan_size > 0 and window_seconds >= 1")
    return plan_windows(
        start,
        tokens_per_five_hours=max(1, round(plan_size * TOKENS_PER_PLAN_UNIT)),
        phase_fraction=phase_seconds / window_seconds,
    )


def _config_number(config: dict[str, object], key: str, default: float) -> float:
    value = config.get(key)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise ValueError(f"the simulated config's {key} must be a finite number")
    return float(value)


def free_tier_windows(start: datetime) -> tuple[PlanWindow, ...]:
    """A free tier's daily request cap, restarting at midnight UTC."""
    midnight = start.astimezone(UTC).replace(hour=0, minute=0, second=0, microsecond=0)
    return (PlanWindow("daily", FREE_TIER_REQUESTS_PER_DAY, PlanUnit.REQUESTS, DAY, midnight),)


SIMULATED_QUOTA_SOURCE: Final = "simulated"


@dataclass(frozen=True, slots=True)
class RegisteredConnection:
    """A registered connection as the shell loads it (a simulated config decrypted)."""

    connection_id: str
    provider: str
    auth_type: str | None
    billing: BillingVerdict
    is_active: bool
    quota_source: str
    simulated_config: object | None = None


def simulated_connections(
    registered: Sequence[RegisteredConnection],
    candidates: Sequence[CandidateIn],
    prices: PriceBook,
    config: LadderConfig,
    start: datetime,
) -> tuple[SimConnection, ...]:
    """The simulated providers of registered connections, windows anchored at `start`:
    a plan gets a 5-hour and a weekly token window (sized from its simulated config, else
    the defaults), a metered connection serving only free models a daily free-tier cap,
    everything else never runs out. ValueError names a connection with a bad config."""
    models: dict[str, set[tuple[str, str]]] = {}
    for candidate in candidates:
        for connection_id in candidate.connection_ids:
            models.setdefault(connection_id, set()).add((candidate.provider, candidate.model))
    result = []
    for row in registered:
        windows: tuple[PlanWindow, ...] = ()
        if row.billing.billing == Billing.SUBSCRIPTION:
            if row.quota_source == SIMULATED_QUOTA_SOURCE and row.simulated_config is not None:
                try:
                    windows = simulated_plan_windows(row.simulated_config, start)
                except ValueError as error:
                    raise ValueError(f"connection {row.connection_id}: {error}") from None
            else:
                windows = plan_windows(start)
        elif row.billing.billing in (Billing.METERED, Billing.UNKNOWN):
            served = models.get(row.connection_id, set())
            if served and all(
                prices.tier_of(provider, model, config.cheap_max_input_usd_per_mtok) == Tier.FREE
                for provider, model in served
            ):
                windows = free_tier_windows(start)
        result.append(
            SimConnection(
                connection_id=row.connection_id,
                provider=row.provider,
                auth_type=row.auth_type,
                billing=row.billing,
                is_active=row.is_active,
                is_polled=core.is_polled(row.quota_source),
                windows=windows,
            )
        )
    return tuple(result)


# --------------------------------------------------------------------------- results


@dataclass(frozen=True, slots=True)
class Outcome:
    """What happened to one request: the rung and connection that served it (None:
    refused) and what it billed."""

    at: datetime
    rung: Rung | None
    connection_id: str | None
    cost_usd: Decimal


@dataclass(frozen=True, slots=True)
class PolicyResult:
    """The accounting of one policy over one trace."""

    policy: Policy
    hours: float
    outcomes: tuple[Outcome, ...]
    spend_usd: Decimal
    refused: int
    paid_requests: int
    paid_while_plan_had_headroom: int
    paid_while_plan_in_band: int
    failed_attempts: int
    rung_flips: int
    paid_seconds_after_resets: tuple[float, ...]
    served_by_rung: tuple[int, ...]  # indexed by Rung

    @property
    def requests(self) -> int:
        """Requests replayed."""
        return len(self.outcomes)

    @property
    def rung_flips_per_hour(self) -> float:
        """Rung changes between consecutive requests of the same selection, per hour."""
        return self.rung_flips / self.hours if self.hours > 0 else 0.0

    @property
    def resets(self) -> int:
        """Plan resets counted: a window that ran down to the exit cutoff restarted,
        leaving the plan above the re-entry floor in every window."""
        return len(self.paid_seconds_after_resets)

    @property
    def median_paid_seconds_after_reset(self) -> float | None:
        """Median seconds paid rungs kept serving after a plan reset (None: no resets)."""
        lags = self.paid_seconds_after_resets
        return statistics.median(lags) if lags else None

    @property
    def max_paid_seconds_after_reset(self) -> float | None:
        """Longest such stretch (None: no resets)."""
        lags = self.paid_seconds_after_resets
        return max(lags) if lags else None


ProgressCallback = Callable[[Policy, int, int], None]

# --------------------------------------------------------------------------- providers


class _WindowState:
    __slots__ = ("end", "spec", "start", "used")

    def __init__(self, spec: PlanWindow, now: datetime) -> None:
        self.spec = spec
        self.used = 0
        self.start = _window_start(spec, now)
        self.end = self.start + spec.length

    def remaining_percent(self) -> float:
        return max(0.0, 100.0 * (1.0 - self.used / self.spec.size))

    def is_full(self) -> bool:
        return self.used >= self.spec.size


def _window_start(spec: PlanWindow, now: datetime) -> datetime:
    periods = (now - spec.anchor) // spec.length  # floors, also before the anchor
    return spec.anchor + spec.length * periods


class _Provider:
    """The ground truth of one connection: its windows and what they hold."""

    __slots__ = ("connection", "next_boundary", "windows")

    def __init__(self, connection: SimConnection, now: datetime) -> None:
        self.connection = connection
        self.windows = [_WindowState(spec, now) for spec in connection.windows]
        self.next_boundary = min((w.end for w in self.windows), default=None)

    def roll(self, now: datetime) -> list[tuple[datetime, float]]:
        """Advance to `now`; (boundary, remaining % just before it) of each window that
        restarted."""
        if self.next_boundary is None or now < self.next_boundary:
            return []
        crossed = []
        for window in self.windows:
            if now >= window.end:
                crossed.append((window.end, window.remaining_percent()))
                window.used = 0
                window.start = _window_start(window.spec, now)
                window.end = window.start + window.spec.length
        self.next_boundary = min(w.end for w in self.windows)
        return crossed

    def has_headroom(self) -> bool:
        return not any(window.is_full() for window in self.windows)

    def is_above(self, percent: float) -> bool:
        """Whether every window holds more than `percent` of its size."""
        return all(window.remaining_percent() > percent for window in self.windows)

    def serves_again_at(self) -> datetime | None:
        """When every full window has restarted (the 429's reset instant)."""
        return max((w.end for w in self.windows if w.is_full()), default=None)

    def consume(self, request: Request) -> None:
        for window in self.windows:
            window.used += window.spec.units(request)

    def reading(self, now: datetime) -> Reading:
        """What a usage endpoint says now: the binding (lowest) window, ties to the later
        reset, as `core.binding_window` reduces windows."""
        if not self.windows:
            return Reading(QuotaStatus.SAFE, 100.0, None, now)
        binding = min(self.windows, key=lambda w: (w.remaining_percent(), -w.end.timestamp()))
        remaining = binding.remaining_percent()
        status = QuotaStatus.EXHAUSTED if remaining <= 0 else QuotaStatus.SAFE
        return Reading(status, remaining, binding.end, now)


# --------------------------------------------------------------------------- one run


@dataclass(slots=True)
class _PendingReset:
    at: datetime
    last_paid_at: datetime | None = None


@dataclass(frozen=True, slots=True)
class _Route:
    """Per selection: its candidates, the plan connections it can reach, and every
    (candidate, connection) pair in the scorer's order (for the cost sort)."""

    candidates: tuple[CandidateIn, ...]
    reachable_plans: tuple[str, ...]
    pairs: tuple[tuple[CandidateIn, str], ...]


@dataclass(slots=True)
class _Tally:
    outcomes: list[Outcome] = field(default_factory=list)
    spend: Decimal = _ZERO
    refused: int = 0
    paid_requests: int = 0
    paid_with_headroom: int = 0
    paid_in_band: int = 0
    failed_attempts: int = 0
    flips: int = 0
    lags: list[float] = field(default_factory=list)
    by_rung: list[int] = field(default_factory=lambda: [0] * len(Rung))


class _Run:
    """One policy over one trace. Mutable state, but no IO and no clock."""

    def __init__(self, world: World, policy: Policy, timing: Timing, trace: Trace) -> None:
        self.world = world
        self.policy = policy
        self.timing = timing
        self.config = world.config
        self.origin = trace.start
        self.connections = world.connection_map()
        self.providers = {
            cid: _Provider(connection, trace.start) for cid, connection in self.connections.items()
        }
        self.next_boundary = min(
            (p.next_boundary for p in self.providers.values() if p.next_boundary is not None),
            default=None,
        )
        self.is_original = policy == Policy.ORIGINAL_DESIGN
        # This product stores readings from polls and 429s; the cost sort reads none.
        self.uses_poller = policy in (Policy.THRIFTY, Policy.SUBSCRIPTION_ONLY)
        self.auto_id = (
            core.SUBSCRIPTION_AUTO_ID
            if policy == Policy.SUBSCRIPTION_ONLY
            else core.THRIFTY_AUTO_ID
        )
        self.cooldown: dict[str, datetime | None] = dict.fromkeys(self.connections)
        self.failures: dict[str, int] = dict.fromkeys(self.connections, 0)
        self.reading: dict[str, Reading | None] = dict.fromkeys(self.connections)
        self.hysteresis: dict[str, Hysteresis] = dict.fromkeys(self.connections, core.NEVER_READ)
        self.cache_at: dict[str, datetime | None] = dict.fromkeys(self.connections)
        self.views: dict[str, ConnectionView] = {}
        for cid in self.connections:
            self._refresh_view(cid)
        self.events: list[tuple[datetime, int, str, str]] = []
        self.sequence = 0
        self.reset_refreshes: dict[str, set[datetime]] = {}
        self.due_age = timing.due_age(self.config)
        self.beat = timedelta(seconds=timing.beat_seconds)
        self.grace = timedelta(seconds=timing.reset_grace_seconds)
        self.cache_ttl = timedelta(seconds=timing.original_cache_ttl_seconds)
        if self.uses_poller:
            for cid, connection in self.connections.items():
                if connection.is_polled and connection.is_active:
                    self._push(trace.start, "due", cid)
        self.tiers: dict[tuple[str, str], Tier] = {
            (c.provider, c.model): world.prices.tier_of(
                c.provider, c.model, self.config.cheap_max_input_usd_per_mtok
            )
            for c in world.candidates
        }
        self.routes: dict[Selection, _Route] = {}
        self.spend_by_window: dict[tuple[Rung, datetime], Decimal] = {}
        self.budget_bounds: tuple[datetime, datetime] | None = None
        self.pending: dict[str, list[_PendingReset]] = {}
        self.last_rung: dict[Selection, Rung] = {}
        self.tally = _Tally()

    # ---------------------------------------------------------------- connection state

    def _refresh_view(self, cid: str) -> None:
        connection = self.connections[cid]
        self.views[cid] = ConnectionView(
            connection_id=cid,
            provider=connection.provider,
            auth_type=connection.auth_type,
            billing=connection.billing,
            is_active=connection.is_active,
            cooldown_until=self.cooldown[cid],
            reading=self.reading[cid],
            # The original design left hysteresis unwired: always in play.
            hysteresis=core.NEVER_READ if self.is_original else self.hysteresis[cid],
        )

    def _push(self, at: datetime, kind: str, cid: str) -> None:
        self.sequence += 1
        heapq.heappush(self.events, (at, self.sequence, kind, cid))

    def _beat_ceil(self, at: datetime) -> datetime:
        ticks = -(-(at - self.origin) // self.beat)  # ceiling division of timedeltas
        return self.origin + self.beat * ticks

    def _store_reading(self, cid: str, reading: Reading, now: datetime) -> None:
        """As `services.store_reading`: current reading, hysteresis, reset-time refresh."""
        self.reading[cid] = reading
        self.hysteresis[cid] = core.hysteresis_after(self.hysteresis[cid], reading, self.config)
        self._refresh_view(cid)
        connection = self.connections[cid]
        if connection.is_polled:
            self._push(self._beat_ceil(reading.checked_at + self.due_age), "due", cid)
            reset_at = reading.reset_at
            if reset_at is not None and reset_at > now:
                scheduled = self.reset_refreshes.setdefault(cid, set())
                if reset_at not in scheduled:
                    # One refresh per reset instant, however many readings name it.
                    scheduled.add(reset_at)
                    self._push(reset_at + self.grace, "reset", cid)

    def _poll(self, cid: str, now: datetime) -> None:
        self._store_reading(cid, self.providers[cid].reading(now), now)

    def _advance(self, now: datetime) -> None:
        """Run every poll due up to `now` and roll the providers' windows to `now`."""
        events = self.events
        while events and events[0][0] <= now:
            at, _, kind, cid = heapq.heappop(events)
            self._roll(at)
            latest = self.reading[cid]
            if kind == "due":
                # Superseded when a newer reading arrived since this poll was scheduled.
                if latest is None or latest.checked_at + self.due_age <= at:
                    self._poll(cid, at)
            else:
                self.reset_refreshes[cid].discard(at - self.grace)
                if latest is None or latest.checked_at < at - self.grace:
                    # Idempotent, as the task: a reading newer than the reset answers it.
                    self._poll(cid, at)
        self._roll(now)
        if self.is_original:
            for cid, connection in self.connections.items():
                if not connection.is_polled:
                    continue
                filled = self.cache_at[cid]
                if filled is None or now - filled >= self.cache_ttl:
                    # The original cache: a snapshot trusted until its TTL expires, with
                    # no reset instant, so a reset goes unnoticed until the next refill.
                    truth = self.providers[cid].reading(now)
                    self.cache_at[cid] = now
                    self.reading[cid] = Reading(truth.status, truth.remaining_percent, None, now)
                    self._refresh_view(cid)

    def _roll(self, now: datetime) -> None:
        if self.next_boundary is None or now < self.next_boundary:
            return
        cutoff = self.config.exit_cutoff_percent
        floor = self.config.reentry_floor
        for cid, provider in self.providers.items():
            crossed = provider.roll(now)
            if not crossed or not provider.connection.is_plan:
                continue
            # Only a plan back above the re-entry floor in every window counts: one left
            # inside the hysteresis band (say a weekly window at 4 %) is not back.
            if provider.is_above(floor):
                for boundary, remaining_before in crossed:
                    # A plan that ran down to the exit cutoff and is back: from here on,
                    # traffic it could serve should return to it.
                    if remaining_before <= cutoff:
                        self.pending.setdefault(cid, []).append(_PendingReset(boundary))
        self.next_boundary = min(
            (p.next_boundary for p in self.providers.values() if p.next_boundary is not None),
            default=None,
        )

    # ---------------------------------------------------------------- routing

    def _route_for(self, selection: Selection) -> _Route:
        route = self.routes.get(selection)
        if route is None:
            matching = tuple(c for c in self.world.candidates if selection.matches(c))
            pairs = tuple((c, cid) for c in matching for cid in c.connection_ids)
            plans = tuple(
                dict.fromkeys(
                    cid
                    for _, cid in pairs
                    if self.connections[cid].is_plan and self.connections[cid].is_active
                )
            )
            # The candidates are filtered here for every kind of selection, so the core
            # decides over them with the flat id (a category filter there is the same).
            route = _Route(
                candidates=matching,
                reachable_plans=plans,
                pairs=pairs,
            )
            self.routes[selection] = route
        return route

    def _budget_window(self, now: datetime) -> tuple[datetime, datetime]:
        bounds = self.budget_bounds
        if bounds is None or not bounds[0] <= now < bounds[1]:
            bounds = core.budget_window_bounds(self.config.budget_window, now)
            self.budget_bounds = bounds
        return bounds

    def _spend_now(self, now: datetime) -> dict[Rung, RungSpend]:
        start, end = self._budget_window(now)
        return {
            rung: RungSpend(self.spend_by_window.get((rung, start), _ZERO), end)
            for rung in PAID_RUNGS
        }

    def handle(self, request: Request) -> None:
        """Replay one request at its instant."""
        now = request.at
        self._advance(now)
        route = self._route_for(request.selection)
        if self.policy == Policy.CHEAPEST_FIRST:
            attempts = self._cheapest_order(route, request)
        else:
            decision = core.decide(
                self.auto_id,
                route.candidates,
                self.views,
                self.tiers,
                self._spend_now(now),
                self.config,
                now,
            )
            attempts = [
                (entry.provider, entry.model, entry.rung, cid)
                for entry in decision.candidates
                for cid in entry.connection_ids
            ]
        tried: set[str] = set()
        for provider, model, rung, cid in attempts:
            if cid in tried:
                continue
            tried.add(cid)
            if self._attempt(cid, provider, model, rung, request, route):
                return
        self.tally.refused += 1
        self.tally.outcomes.append(Outcome(now, None, None, _ZERO))

    def _cheapest_order(self, route: _Route, request: Request) -> list[tuple[str, str, Rung, str]]:
        now = request.at
        priced = []
        for order, (candidate, cid) in enumerate(route.pairs):
            connection = self.connections[cid]
            cooldown = self.cooldown[cid]
            if not connection.is_active or (cooldown is not None and cooldown > now):
                continue
            # Deliberately blind to billing: a plan login is priced like a metered key.
            cost = self.world.prices.cost_usd(
                candidate.provider, candidate.model, request.input_tokens, request.output_tokens
            )
            rung = core.rung_for(
                connection.billing, self.tiers[(candidate.provider, candidate.model)]
            )
            priced.append((cost, order, candidate.provider, candidate.model, rung, cid))
        priced.sort(key=lambda item: (item[0], item[1]))
        return [(provider, model, rung, cid) for _, _, provider, model, rung, cid in priced]

    def _attempt(
        self, cid: str, provider: str, model: str, rung: Rung, request: Request, route: _Route
    ) -> bool:
        now = request.at
        connection = self.connections[cid]
        upstream = self.providers[cid]
        has_headroom = upstream.has_headroom()
        if not has_headroom and not connection.bills_past_plan:
            self._refused_by_upstream(cid, upstream.serves_again_at(), now)
            return False
        cost = _ZERO
        if connection.is_billed or not has_headroom:
            # Metered keys bill every request; a plan past its windows bills its overage.
            cost = self.world.prices.cost_usd(
                provider, model, request.input_tokens, request.output_tokens
            )
        upstream.consume(request)
        if self.failures[cid] or self.cooldown[cid] is not None:
            change = core.apply_event(
                core.EventKind.SUCCESS,
                consecutive_failures=self.failures[cid],
                retry_after_seconds=None,
                reset_at=None,
                config=self.config,
                now=now,
            )
            self.cooldown[cid] = change.cooldown_until
            self.failures[cid] = change.consecutive_failures
            self._refresh_view(cid)
        self._account(cid, rung, cost, request, route)
        return True

    def _refused_by_upstream(self, cid: str, reset_at: datetime | None, now: datetime) -> None:
        """A 429 with the instant the plan serves again: the gateway's event, then the
        gateway falls through to the next connection of the pool."""
        self.tally.failed_attempts += 1
        change = core.apply_event(
            core.EventKind.QUOTA_EXHAUSTED,
            consecutive_failures=self.failures[cid],
            retry_after_seconds=None,
            # The original design left the clamp unwired: it never saw the reset instant.
            reset_at=None if self.is_original else reset_at,
            config=self.config,
            now=now,
        )
        self.cooldown[cid] = change.cooldown_until
        self.failures[cid] = change.consecutive_failures
        if self.uses_poller:
            self._store_reading(cid, core.exhausted_reading(reset_at, now), now)
        else:
            self._refresh_view(cid)

    def _account(
        self, cid: str, rung: Rung, cost: Decimal, request: Request, route: _Route
    ) -> None:
        now = request.at
        tally = self.tally
        tally.spend += cost
        tally.by_rung[rung] += 1
        tally.outcomes.append(Outcome(now, rung, cid, cost))
        if rung.is_budget_gated:
            key = (rung, self._budget_window(now)[0])
            self.spend_by_window[key] = self.spend_by_window.get(key, _ZERO) + cost
            tally.paid_requests += 1
            # Headroom is ground truth, not a reading. Above the re-entry floor in every
            # window a plan is usable whatever its hysteresis state; between the exit
            # cutoff and the floor it is inside the band, which a dropped-out plan
            # deliberately leaves unused; at or below the cutoff nothing counts.
            plans = [self.providers[plan] for plan in route.reachable_plans]
            if any(plan.is_above(self.config.reentry_floor) for plan in plans):
                tally.paid_with_headroom += 1
            elif any(plan.is_above(self.config.exit_cutoff_percent) for plan in plans):
                tally.paid_in_band += 1
            for plan in route.reachable_plans:
                for pending in self.pending.get(plan, ()):
                    pending.last_paid_at = now
        if self.connections[cid].is_plan:
            for pending in self.pending.pop(cid, ()):
                tally.lags.append(_lag(pending))
        previous = self.last_rung.get(request.selection)
        if previous is not None and previous != rung:
            tally.flips += 1
        self.last_rung[request.selection] = rung

    def finish(self, hours: float) -> PolicyResult:
        """Close the open reset stretches and freeze the tally."""
        tally = self.tally
        for pendings in self.pending.values():
            tally.lags.extend(_lag(pending) for pending in pendings)
        self.pending.clear()
        return PolicyResult(
            policy=self.policy,
            hours=hours,
            outcomes=tuple(tally.outcomes),
            spend_usd=tally.spend,
            refused=tally.refused,
            paid_requests=tally.paid_requests,
            paid_while_plan_had_headroom=tally.paid_with_headroom,
            paid_while_plan_in_band=tally.paid_in_band,
            failed_attempts=tally.failed_attempts,
            rung_flips=tally.flips,
            paid_seconds_after_resets=tuple(tally.lags),
            served_by_rung=tuple(tally.by_rung),
        )


def _lag(pending: _PendingReset) -> float:
    # Seconds from the reset to the last request a paid rung served that the plan could
    # have taken, before the plan served again; 0 when paid rungs served none.
    if pending.last_paid_at is None:
        return 0.0
    return (pending.last_paid_at - pending.at).total_seconds()


# --------------------------------------------------------------------------- entry points


def simulate(
    world: World,
    trace: Trace,
    policy: Policy,
    timing: Timing | None = None,
    on_progress: ProgressCallback | None = None,
) -> PolicyResult:
    """Replay the trace under one policy on a simulated clock; `on_progress(policy, day,
    days)` is called as each simulated day starts."""
    run = _Run(world, policy, timing or Timing(), trace)
    days = max(1, math.ceil((trace.end - trace.start) / timedelta(days=1)))
    next_day = 0
    day = timedelta(days=1)
    for request in trace.requests:
        if on_progress is not None:
            while next_day < days and request.at >= trace.start + day * next_day:
                on_progress(policy, next_day + 1, days)
                next_day += 1
        run.handle(request)
    if on_progress is not None:
        # Quiet days at the end still count, so the caller always hears the last one.
        for remaining in range(next_day, days):
            on_progress(policy, remaining + 1, days)
    return run.finish(trace.hours)


def simulate_all(
    world: World,
    trace: Trace,
    policies: Iterable[Policy] = ALL_POLICIES,
    timing: Timing | None = None,
    on_progress: ProgressCallback | None = None,
) -> tuple[PolicyResult, ...]:
    """Replay the trace under every policy, each against fresh providers."""
    return tuple(simulate(world, trace, policy, timing, on_progress) for policy in policies)


def cumulative_spend(
    result: PolicyResult, start: datetime, end: datetime, buckets: int
) -> list[float]:
    """Cumulative billed USD at the end of each of `buckets` equal slices of [start, end]."""
    span = max((end - start) / buckets, _MICROSECOND)
    totals = [0.0] * buckets
    for outcome in result.outcomes:
        if outcome.cost_usd:
            index = min(buckets - 1, max(0, int((outcome.at - start) / span)))
            totals[index] += float(outcome.cost_usd)
    running = 0.0
    for index, value in enumerate(totals):
        running += value
        totals[index] = running
    return totals


def rung_shares(
    result: PolicyResult, start: datetime, end: datetime, buckets: int
) -> list[tuple[int, ...]]:
    """Per slice of [start, end]: requests served by each rung, then refused (last)."""
    span = max((end - start) / buckets, _MICROSECOND)
    counts = [[0] * (len(Rung) + 1) for _ in range(buckets)]
    for outcome in result.outcomes:
        index = min(buckets - 1, max(0, int((outcome.at - start) / span)))
        counts[index][len(Rung) if outcome.rung is None else outcome.rung] += 1
    return [tuple(row) for row in counts]
