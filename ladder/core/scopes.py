"""Windows scoped to a model and billing evidence from the wire: the pure rules.

spec/ladder.md, "Windows scoped to a model": a scope names a model family (`opus`,
`sonnet`, ...) or a model id. A model matches a family when the family is one of the
tokens of its id split on `-`, `.`, `_`, `/` and `:` (case-insensitive), and an id when
equal after normalisation. "Billing evidence from the wire": evidence can only make a
connection less safe, never more.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import replace
from datetime import datetime, timedelta
from typing import Final

from billing.classify import Billing, BillingVerdict, Overage
from ladder.core.prose import duration_text, instant_text
from ladder.core.quota import binding_reading, derive_status, hysteresis_after, quota_cause_within
from ladder.core.types import (
    NEVER_READ,
    UNVERIFIED_QUOTA_REASONS,
    Cause,
    ConnectionView,
    Grouping,
    Hysteresis,
    HysteresisState,
    LadderConfig,
    OverageEvidence,
    OverageSays,
    Reading,
    Reason,
    ScopedQuota,
    WindowReading,
)

_SEPARATORS: Final = re.compile(r"[-._/:]")


def normalise_scope(text: str) -> str:
    """A scope or model id as compared: trimmed and lower-cased."""
    return text.strip().lower()


def model_tokens(model: str) -> frozenset[str]:
    """The tokens of a model id (lower-cased, split on `-`, `.`, `_`, `/`, `:`)."""
    return frozenset(token for token in _SEPARATORS.split(normalise_scope(model)) if token)


def scope_matches(scope: str, model: str) -> bool:
    """True when `model` is in `scope` (a family among its tokens, or the same id)."""
    wanted = normalise_scope(scope)
    if not wanted:
        return False
    return wanted == normalise_scope(model) or wanted in model_tokens(model)


def scope_names_a_model(scope: str, models: Iterable[str]) -> bool:
    """True when the scope matches at least one of the models the product can name; one
    that matches none binds the whole connection (fail closed)."""
    return any(scope_matches(scope, model) for model in models)


def effective_overage(verdict: BillingVerdict, evidence: OverageEvidence | None) -> Overage:
    """What the pools use: `meters-to-paid` while the newest evidence says "can meter",
    the catalog's otherwise (the rule is one-sided: "hard stop" evidence never makes a
    connection safer than its catalog entry)."""
    if evidence is not None and evidence.says == OverageSays.CAN_METER:
        return Overage.METERS_TO_PAID
    return verdict.overage


def can_meter(verdict: BillingVerdict, evidence: OverageEvidence | None) -> bool:
    """True when the connection may bill past its plan's limit (effective overage not
    hard-stop)."""
    return effective_overage(verdict, evidence) != Overage.HARD_STOP


def started_metering(
    verdict: BillingVerdict,
    before: OverageEvidence | None,
    after: OverageEvidence | None,
) -> bool:
    """True when new evidence turns a hard-stop catalog entry into one that can meter
    (the transition that is audited and notified once)."""
    if verdict.overage != Overage.HARD_STOP:
        return False
    was = before is not None and before.says == OverageSays.CAN_METER
    now = after is not None and after.says == OverageSays.CAN_METER
    return now and not was


def evidence_text(evidence: OverageEvidence) -> str:
    """The evidence for a human: what said it, from where, and when it was seen."""
    where = {"usage": "usage endpoint", "headers": "response headers", "push": "pushed reading"}
    source = where.get(evidence.source, evidence.source or "the wire")
    seen = "" if evidence.seen_at is None else f", seen {instant_text(evidence.seen_at)}"
    return f"{evidence.detail} ({source}{seen})"


def plan_can_meter(view: ConnectionView) -> bool:
    """True for a plan connection that may bill past its limit: trying it is not free."""
    return view.billing.billing == Billing.SUBSCRIPTION and can_meter(view.billing, view.evidence)


# --------------------------------------------------------------------------- reserve


def connection_config(view: ConnectionView, config: LadderConfig) -> LadderConfig:
    """The settings with this connection's own reserve applied (its exit cutoff and its
    re-entry floor where set; the settings' elsewhere)."""
    return reserve_config(config, view.exit_cutoff_percent, view.reentry_min_remaining_percent)


def reserve_config(config: LadderConfig, cutoff: float | None, floor: float | None) -> LadderConfig:
    """The settings with a connection's own exit cutoff and re-entry floor where set."""
    if cutoff is None and floor is None:
        return config
    return replace(
        config,
        exit_cutoff_percent=config.exit_cutoff_percent if cutoff is None else cutoff,
        reentry_min_remaining_percent=(
            config.reentry_min_remaining_percent if floor is None else floor
        ),
    )


def has_own_reserve(view: ConnectionView) -> bool:
    """True when the connection sets its own exit cutoff or re-entry floor."""
    return view.exit_cutoff_percent is not None or view.reentry_min_remaining_percent is not None


_THRESHOLD_REASONS: Final = frozenset({Reason.QUOTA_EXHAUSTED, Reason.BELOW_REENTRY})


def with_reserve_named(cause: Cause | None, view: ConnectionView) -> Cause | None:
    """The cause, its sentence saying that the threshold is the connection's own."""
    if cause is None or not has_own_reserve(view) or cause.reason not in _THRESHOLD_REASONS:
        return cause
    return replace(cause, detail=f"{cause.detail} (this connection's own reserve)")


# --------------------------------------------------------------------------- scopes


def scope_applies(scope: str, model: str, known_models: frozenset[str]) -> bool:
    """True when a scoped window binds a candidate of `model`: its scope matches the
    model, or names no model the product knows (then it binds every model)."""
    return scope_matches(scope, model) or not scope_names_a_model(scope, known_models)


def scope_cause(
    scoped: ScopedQuota,
    config: LadderConfig,
    now: datetime,
    max_age: timedelta,
    *,
    fails_open: bool,
) -> Cause | None:
    """What keeps a model scope's candidates off the quota-gated rungs; None: usable.
    `fails_open`: an unverified reading passes (thrifty, where trying costs nothing)."""
    label = f"Model scope {scoped.model_scope}"
    cooldown_until = scoped.cooldown_until
    if cooldown_until is not None and cooldown_until > now:
        return Cause(
            Reason.COOLING_DOWN,
            f"{label}: cooling down until {instant_text(cooldown_until)} "
            f"({duration_text((cooldown_until - now).total_seconds())} s from now)",
            cooldown_until,
        )
    if scoped.reading is None:
        return None
    cause = quota_cause_within(scoped.reading, scoped.hysteresis, config, now, max_age)
    if cause is None:
        return None
    if fails_open and cause.reason in UNVERIFIED_QUOTA_REASONS:
        return None
    return replace(cause, detail=f"{label}: {cause.detail}")


def model_scope_cause(
    view: ConnectionView,
    model: str,
    grouping: Grouping,
    config: LadderConfig,
    now: datetime,
    max_age: timedelta,
    known_models: frozenset[str],
) -> Cause | None:
    """The first scope binding `model` on this connection that keeps it out; None when
    every such scope passes (or none binds it)."""
    fails_open = grouping == Grouping.THRIFTY and not plan_can_meter(view)
    own = connection_config(view, config)
    for scoped in view.scoped:
        if not scope_applies(scoped.model_scope, model, known_models):
            continue
        cause = scope_cause(scoped, own, now, max_age, fails_open=fails_open)
        if cause is not None:
            return with_reserve_named(cause, view)
    return None


def scoped_after(
    previous: Iterable[ScopedQuota],
    windows: Iterable[WindowReading],
    checked_at: datetime,
    config: LadderConfig,
    now: datetime,
) -> tuple[ScopedQuota, ...]:
    """The model scopes after a new current reading, sorted by scope: one per scope among
    its windows (the scope's binding window, its hysteresis moved by it) and one per
    scope whose cooldown is still in force (no window: the newest reading has none)."""
    by_scope: dict[str, list[WindowReading]] = {}
    for window in windows:
        if window.model_scope is not None:
            by_scope.setdefault(window.model_scope, []).append(replace(window, model_scope=None))
    before = {scoped.model_scope: scoped for scoped in previous}
    after: dict[str, ScopedQuota] = {}
    for scope, scoped_windows in by_scope.items():
        binding = binding_reading(scoped_windows)
        remaining = None if binding is None else binding.remaining_percent
        reading = Reading(
            derive_status(remaining),
            remaining,
            None if binding is None else binding.reset_at,
            checked_at,
        )
        old = before.get(scope)
        hysteresis = old.hysteresis if old is not None else NEVER_READ
        moved = hysteresis_after(hysteresis, reading, config)
        if hysteresis == NEVER_READ and moved.state is HysteresisState.IN_PLAY:
            moved = Hysteresis(
                HysteresisState.IN_PLAY, checked_at, "in play since its first reading"
            )
        cooldown = None if old is None else old.cooldown_until
        if cooldown is not None and cooldown <= now:
            cooldown = None
        after[scope] = ScopedQuota(scope, reading, moved, cooldown)
    for scope, old in before.items():
        if scope not in after and old.cooldown_until is not None and old.cooldown_until > now:
            after[scope] = ScopedQuota(scope, None, old.hysteresis, old.cooldown_until)
    return tuple(after[scope] for scope in sorted(after))


def cooled_scope(
    previous: Iterable[ScopedQuota], scope: str, cooldown_until: datetime | None
) -> tuple[ScopedQuota, ...]:
    """The model scopes with `scope` cooling down until `cooldown_until` (a model-scoped
    rejection cools only (connection, that scope))."""
    after = {scoped.model_scope: scoped for scoped in previous}
    old = after.get(scope)
    if old is None:
        after[scope] = ScopedQuota(scope, None, NEVER_READ, cooldown_until)
    else:
        after[scope] = replace(old, cooldown_until=cooldown_until)
    return tuple(after[name] for name in sorted(after))
