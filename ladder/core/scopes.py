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
from typing import Final

from billing.classify import BillingVerdict, Overage
from ladder.core.types import OverageEvidence, OverageSays

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
