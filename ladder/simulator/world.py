"""The simulated world: connections with their plan windows, the candidates, the price
book and config, the product's refresh timing, and the plan sizing of registered
connections."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from enum import StrEnum
from typing import Final

from billing.classify import UNCURATED_VERDICT, Billing, BillingVerdict, Overage
from billing.tiers import PriceBook, Tier
from ladder import core
from ladder.core import (
    CandidateIn,
    LadderConfig,
)
from ladder.simulator.trace import Request

# --------------------------------------------------------------------------- the world


class PlanUnit(StrEnum):
    """What a plan window counts."""

    REQUESTS = "requests"
    TOKENS = "tokens"  # input + output


@dataclass(frozen=True, slots=True)
class PlanWindow:
    """One usage window of a simulated provider: `size` units per `length`, restarting at
    `anchor + k * length`. `model_scope`: a per-model cap (a family such as `opus`, or a
    model id) that counts and binds only the requests of its models; None binds every
    request (spec/ladder.md, "Windows scoped to a model")."""

    name: str
    size: int
    unit: PlanUnit
    length: timedelta
    anchor: datetime
    model_scope: str | None = None

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
    # The account can bill past its plan's limit whatever the catalog says (a Claude plan
    # with extra usage on, a Codex account holding credits); its usage endpoint says so.
    can_meter: bool = False

    @property
    def is_plan(self) -> bool:
        """A subscription plan connection (rung 0)."""
        return self.billing.billing == Billing.SUBSCRIPTION

    @property
    def bills_past_plan(self) -> bool:
        """A plan whose overage meters to paid (by its catalog entry, or because this
        account can meter) keeps serving past its windows, billed."""
        return self.is_plan and (self.can_meter or self.billing.overage == Overage.METERS_TO_PAID)

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
