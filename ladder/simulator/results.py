"""The policies compared and the accounting of one run: outcomes, totals, and the
series the report charts."""

from __future__ import annotations

import statistics
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from decimal import Decimal
from enum import StrEnum
from typing import Final

from ladder import core
from ladder.core import Decision, Reading, Rung

_MICROSECOND: Final = timedelta(microseconds=1)

# --------------------------------------------------------------------------- policies


class Policy(StrEnum):
    """The routing policies a trace is replayed under."""

    THRIFTY = "thrifty"
    SUBSCRIPTION_ONLY = "subscription-only"
    CHEAPEST_FIRST = "cheapest-first"
    ORIGINAL_DESIGN = "original-design"

    @property
    def label(self) -> str:
        """What the report calls the policy (the value stays the name in code and CSV)."""
        return _POLICY_LABEL[self]

    @property
    def summary(self) -> str:
        """One sentence on what the policy does."""
        return _POLICY_SUMMARY[self]


_POLICY_LABEL: Final[dict[Policy, str]] = {
    Policy.THRIFTY: "Thrifty (this product)",
    Policy.SUBSCRIPTION_ONLY: "Plans only",
    Policy.CHEAPEST_FIRST: "Cheapest price first",
    Policy.ORIGINAL_DESIGN: "Thrifty, earlier design",
}

_POLICY_SUMMARY: Final[dict[Policy, str]] = {
    Policy.THRIFTY: (
        "This product's auto/thrifty pool: use the subscription plans first, then step "
        "up one rung at a time (keyless, free, cheap, premium) only when the cheaper "
        "ones are out; check a plan's quota again the moment it resets; stop paying for "
        "a rung once its budget is spent."
    ),
    Policy.SUBSCRIPTION_ONLY: (
        "This product's auto/subscription pool: only plans with verified quota left. "
        "When none is left it refuses the request rather than pay for it."
    ),
    Policy.CHEAPEST_FIRST: (
        "A plain price sort for comparison: every connection priced as if it billed per "
        "request at its model's list price, cheapest first. It knows nothing of plans, "
        "quota or budgets."
    ),
    Policy.ORIGINAL_DESIGN: (
        "Thrifty as the first version of this router ran it: quota read through a "
        "3-minute cache that does not know when a plan resets, waits after a refusal "
        "not cut short at the reset, and no margin between leaving and re-joining a "
        "plan."
    ),
}

ALL_POLICIES: Final = tuple(Policy)

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
    # Plan capacity that expired unused: at each restart of a plan's longest window, the
    # share of it left, summed (1.0: one whole window of one seat).
    plan_windows_expired_unused: float = 0.0
    # Consecutive turns of one conversation, and how many of them changed connection.
    conversation_turns: int = 0
    conversation_switches: int = 0
    # What plans billed past their limit (an overage-enabled plan serving on), in USD and
    # requests: outside every budget, and under auto/subscription a broken promise.
    plan_overage_usd: Decimal = Decimal(0)
    plan_overage_requests: int = 0

    @property
    def switches_per_turn(self) -> float:
        """The share of consecutive turns of a conversation that changed connection."""
        return (
            self.conversation_switches / self.conversation_turns if self.conversation_turns else 0.0
        )

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


@dataclass(frozen=True, slots=True)
class Step:
    """One thing a run did at `at` that the product's shell would do through its
    services: store a reading, apply a gateway event, or decide a pool."""

    at: datetime
    connection_id: str | None = None
    reading: Reading | None = None
    event: core.EventKind | None = None
    reset_at: datetime | None = None
    decision: Decision | None = None


# Hears every step of a run, in order (the parity test replays them through the shell).
Observer = Callable[[Step], None]


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
