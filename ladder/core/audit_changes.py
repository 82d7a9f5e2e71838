"""The audit trail for people: what each recorded change did, field by field, in words
(`field_changes`), and what each kind of target is called (`TARGET_KINDS`).

Pure: it reads the `before` / `after` snapshots an audit row recorded (plain JSON) and
returns text; the shell finds the rows and the dashboard links them."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import Any, Final

from ladder.core.prose import money_text
from ladder.core.settings_bounds import TUNING

# Shown in place of any value whose field name says it is a secret (a snapshot should
# never hold one: this is the second line of defence, not the first).
HIDDEN: Final = "hidden"
NOTHING: Final = "none"
CHANGED: Final = "changed (hidden)"
_SENSITIVE = re.compile(r"secret|hash|credential|password|ciphertext|api_key", re.IGNORECASE)


@dataclass(frozen=True, slots=True)
class TargetKind:
    """What a target type is called in the dashboard, and how a row names its object."""

    name: str
    # The snapshot fields that name the object ("claude / oauth"), in order.
    naming_fields: tuple[str, ...] = ()


TARGET_KINDS: Final[Mapping[str, TargetKind]] = {
    "catalog": TargetKind("Catalog entry", ("provider", "auth_type")),
    "price": TargetKind("Price", ("provider", "model")),
    "settings": TargetKind("Settings"),
    "candidate": TargetKind("Candidate", ("provider", "model")),
    "connection": TargetKind("Connection", ("provider", "auth_type")),
    "token": TargetKind("API token", ("name",)),
    "webhook": TargetKind("Webhook", ("name",)),
    "notification": TargetKind("Test notification", ("webhook",)),
}

FIELD_LABELS: Final[Mapping[str, str]] = {
    # catalog and prices
    "provider": "Provider",
    "auth_type": "Auth type",
    "billing": "Billing",
    "overage": "Overage",
    "model": "Model",
    "input_usd_per_mtok": "Input price (USD per M tokens)",
    "output_usd_per_mtok": "Output price (USD per M tokens)",
    "tier_override": "Tier override",
    "source": "Source",
    "needs_review": "Needs review",
    "reason": "Reason",
    # settings: the labels of the settings form
    **{name: field.label for name, field in TUNING.items()},
    # candidates
    "categories": "Categories",
    "priority": "Priority",
    "connection_id": "Pinned connection",
    "allowed_connection_ids": "Allowlist",
    # tokens, webhooks, notifications
    "name": "Name",
    "scope": "Scope",
    "prefix": "Starts with",
    "revoked_at": "Revoked at",
    "target": "Sends to",
    "format": "Format",
    "kinds": "Notify about",
    "is_active": "Active",
    "secret": "Signing secret",
    "webhook": "Webhook",
    "kind": "Kind",
}
_ORDER: Final = {name: index for index, name in enumerate(FIELD_LABELS)}


@dataclass(frozen=True, slots=True)
class FieldChange:
    """One field of a change: its label, and its value before and after as text (None:
    the object did not exist on that side)."""

    field: str
    label: str
    before: str | None
    after: str | None


def kind_name(target_type: str) -> str:
    """What the dashboard calls a target type ("Catalog entry"); unknown ones as stored."""
    kind = TARGET_KINDS.get(target_type)
    return kind.name if kind is not None else target_type.replace("_", " ").capitalize()


def target_label(target_type: str, before: Any, after: Any) -> str:
    """The object's own name from its snapshot ("claude / oauth", "ci-gateway"), or ""."""
    kind = TARGET_KINDS.get(target_type)
    snapshot = after if isinstance(after, Mapping) else before
    if kind is None or not isinstance(snapshot, Mapping):
        return ""
    parts = [value_text(snapshot.get(name)) for name in kind.naming_fields if name in snapshot]
    return " / ".join(part for part in parts if part != NOTHING)


def value_text(value: Any) -> str:
    """A recorded value for people: lists comma-separated, booleans yes / no."""
    if value is None or value == "" or value == []:
        return NOTHING
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:g}"
    if isinstance(value, list | tuple):
        return ", ".join(value_text(item) for item in value)
    if isinstance(value, Mapping):
        return ", ".join(f"{key}: {value_text(item)}" for key, item in value.items())
    return str(value)


_DECIMAL = re.compile(r"-?\d+\.\d+")
_NUMBER = re.compile(r"-?\d+(\.\d+)?")


def _money(value: Any) -> Any:
    """A recorded price or budget ("2.500000") to the cent or beyond ("2.50", "0.075"),
    as every page writes one (`money_text`)."""
    if not isinstance(value, str) or not _DECIMAL.fullmatch(value):
        return value
    return money_text(Decimal(value))


def _decimal(value: Any) -> Decimal | None:
    """A recorded decimal ("20.000000", "20", 20.0) as a number; None for anything else."""
    if isinstance(value, bool) or not isinstance(value, str | int | float | Decimal):
        return None
    if isinstance(value, str) and not _NUMBER.fullmatch(value):
        return None
    try:
        return Decimal(str(value))
    except InvalidOperation:  # pragma: no cover - the pattern admits numbers only
        return None


def same_value(old: Any, new: Any) -> bool:
    """Whether two recorded values are the same for people: equal, or the same number
    written differently ("20.00" and "20", 5 and 5.0): no change to record or show."""
    if old == new:
        return True
    old_number, new_number = _decimal(old), _decimal(new)
    return old_number is not None and old_number == new_number


def unchanged(before: Any, after: Any) -> bool:
    """Whether an update changed no field (every value the same, see `same_value`)."""
    if not isinstance(before, Mapping) or not isinstance(after, Mapping):
        return False
    return set(before) == set(after) and all(
        same_value(before[name], after[name]) for name in before
    )


def _shown(field: str, value: Any) -> str:
    if _SENSITIVE.search(field):
        return HIDDEN
    if field.endswith(("_usd", "_usd_per_mtok")):
        value = _money(value)
    return value_text(value)


def _ordered(names: set[str]) -> list[str]:
    return sorted(names, key=lambda name: (_ORDER.get(name, len(_ORDER)), name))


def field_changes(action: str, before: Any, after: Any) -> list[FieldChange]:
    """The fields a change touched: every field of a created or deleted object (the
    other side None), only the changed ones of an update (a secret's value hidden; a
    number written differently, "20.00" and "20", is no change)."""
    old = before if isinstance(before, Mapping) else {}
    new = after if isinstance(after, Mapping) else {}
    changes = []
    for name in _ordered(set(old) | set(new)):
        label = FIELD_LABELS.get(name, name.replace("_", " ").capitalize())
        if action == "create" or not old:
            changes.append(FieldChange(name, label, None, _shown(name, new.get(name))))
        elif action == "delete" or not new:
            changes.append(FieldChange(name, label, _shown(name, old.get(name)), None))
        elif same_value(old.get(name), new.get(name)):
            continue
        elif _SENSITIVE.search(name):
            changes.append(FieldChange(name, label, HIDDEN, CHANGED))
        else:
            changes.append(
                FieldChange(name, label, _shown(name, old.get(name)), _shown(name, new.get(name)))
            )
    return changes
