"""What can change a pool: whether a write to one connection (a reading, a gateway
event) must move the `state` change counter, which throws away every cached decision in
every process.

A decision is a function of each referenced connection's **standing** in its grouping:
the cause that keeps it out (or none) and when that cause says it may come back. For a
connection and a grouping the standing is

- the connection-wide cause (`connection_cause`: inactive, billing in
  `auto/subscription`, cooling down) with its `may_return_at` (the cooldown's end);
- else the quota cause of the quota-gated rungs (`grouping_quota_cause`: quota_unknown,
  reset_passed, quota_stale, quota_exhausted, below_reentry incl. the hysteresis band,
  with thrifty's fail-open applied) with its `may_return_at` (the reading's reset);
- else none: usable.

(The paid rungs' budget causes depend on spend, never on a connection; the connection's
rung depends on its billing, which no reading or event changes.) A cached decision is kept
until its `valid_until`, the earliest instant at which any of its inputs changes on its
own (`inputs_valid_until`); until then every input's standing is constant by construction.

A decision also reads, of a plan connection that serves somewhere, its **preference key**
(`ladder/core/preference.py`: the reset and remaining percent of its current reading's
binding window, or none), which places it in the order of preference of the plan
connections. The key changes on its own only at instants `inputs_valid_until` already
holds (the reading's reset, the reading turning stale).

So a write to one connection **can change a pool** iff, in either grouping, its standing
at the write's instant differs before and after the write (the quota cause a cooldown
hides included: a decision computed just after the cooldown's end, before the write
committed, read it), or it serves in a grouping and
is a plan connection whose preference key differs before and after the write, or its own
contribution to `inputs_valid_until` becomes EARLIER (None counts as never). When none
holds, every cached decision stays correct until its own `valid_until`: the standing (and
key) after the write equals the one before it on [now, valid_until), because the instant
it can change on its own is no earlier than before, and before it was no earlier than
`valid_until`. A
later contribution is safe: the cached decision just expires early and is recomputed.

What may lag in a cached decision after a write that did not move the counter (never
the candidates, their order, rungs and connection lists; never an excluded row's
provider, model, connection, rung or reason; never `next_change_at`):

- the numbers in an exclusion's `detail` sentence (the remaining percent, a reading's
  age, a cooldown's seconds from now);
- `computed_at`, and `valid_until`, which may be EARLIER than a recomputation would give
  (never later).

That lag lasts at most until the cached decision's `valid_until`, which comes at most
`max_state_age_seconds` (plus one microsecond) after the `checked_at` of the newest reading
it was computed from, for every connection with a reading; for a connection never read
or only gated by billing or inactivity, the sentence has no numbers to lag.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import NamedTuple

from ladder.core.decide import (
    connection_cause,
    connection_rung,
    grouping_quota_cause,
    inputs_valid_until,
)
from ladder.core.preference import preference_key, scoped_keys
from ladder.core.scopes import connection_config, plan_can_meter, scope_cause
from ladder.core.types import ConnectionView, Grouping, LadderConfig, Reason, Rung


class Standing(NamedTuple):
    """What a decision reads of one connection in one grouping: the reason that keeps it
    out (None: usable) and when that reason says it may come back (None: not known);
    behind a cause that ends on its own (a cooldown), the quota reason it hides (`masked`,
    None: none), which decides the standing the moment it ends."""

    reason: Reason | None
    may_return_at: datetime | None
    masked: Reason | None = None


def standing(
    view: ConnectionView, grouping: Grouping, config: LadderConfig, now: datetime
) -> Standing:
    """The connection's standing in a grouping at `now`, by the decision's own rules."""
    max_age = timedelta(seconds=config.max_state_age_seconds)
    cause = connection_cause(view, grouping, now)
    if cause is None:
        quota = grouping_quota_cause(view, grouping, config, now, max_age)
        return (
            Standing(None, None) if quota is None else Standing(quota.reason, quota.may_return_at)
        )
    if cause.may_return_at is None:
        return Standing(cause.reason, None)
    # A cooldown ends on its own; what it hides stands then. A decision computed just
    # after its end, before a write made during it committed, read the hidden quota
    # cause: a write that changes that cause must move the counter even though the
    # cooldown hides it at the write's own instant.
    hidden = grouping_quota_cause(view, grouping, config, now, max_age)
    return Standing(cause.reason, cause.may_return_at, None if hidden is None else hidden.reason)


def scoped_standings(
    view: ConnectionView, grouping: Grouping, config: LadderConfig, now: datetime
) -> tuple[tuple[str, Standing], ...]:
    """Each model scope's standing in a grouping at `now`, by the decision's own rules
    (ladder/core/scopes.py), sorted by scope."""
    max_age = timedelta(seconds=config.max_state_age_seconds)
    fails_open = grouping == Grouping.THRIFTY and not plan_can_meter(view)
    own = connection_config(view, config)
    standings = []
    for scoped in view.scoped:
        cause = scope_cause(scoped, own, now, max_age, fails_open=fails_open)
        standings.append(
            (
                scoped.model_scope,
                Standing(None, None)
                if cause is None
                else Standing(cause.reason, cause.may_return_at),
            )
        )
    return tuple(standings)


def changes_on_its_own_at(
    view: ConnectionView, config: LadderConfig, now: datetime
) -> datetime | None:
    """The connection's contribution to a decision's validity: the earliest future
    instant at which it may change with no write (None: never)."""
    return inputs_valid_until((view,), {}, config, now)


def _is_earlier(instant: datetime | None, than: datetime | None) -> bool:
    # None is "never": any instant is earlier than never, never is earlier than nothing.
    return instant is not None and (than is None or instant < than)


def can_change_pool(
    before: ConnectionView | None,
    after: ConnectionView | None,
    config: LadderConfig,
    now: datetime,
) -> bool:
    """Whether a write that turns the connection `before` into `after` at `now` can
    change any pool (None: no such connection). See the module docstring."""
    if before is None or after is None:
        return before is not after
    serves = False
    for grouping in Grouping:
        was = standing(before, grouping, config, now)
        if was != standing(after, grouping, config, now):
            return True
        if (before.scoped or after.scoped) and scoped_standings(
            before, grouping, config, now
        ) != scoped_standings(after, grouping, config, now):
            # A model scope's standing moved: its models enter or leave the pool.
            return True
        serves = serves or was.reason is None
    if serves and moves_preference(before, after, config, now):
        return True
    return _is_earlier(
        changes_on_its_own_at(after, config, now), changes_on_its_own_at(before, config, now)
    )


def moves_preference(
    before: ConnectionView, after: ConnectionView, config: LadderConfig, now: datetime
) -> bool:
    """Whether the write changes the connection's place in the order of preference of
    the plan connections (`ladder/core/preference.py`): its key, for a plan connection."""
    if connection_rung(after.billing) is not Rung.SUBSCRIPTION:
        return False
    if preference_key(before, config, now) != preference_key(after, config, now):
        return True
    # A model scope's key orders that scope's models (their binding window may be it).
    if not (before.scoped or after.scoped):
        return False
    return scoped_keys(before, config, now) != scoped_keys(after, config, now)
