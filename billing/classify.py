"""Pure billing classification of a connection against the curated catalog.

No ORM, no clock, no IO: the shell hands in plain rows. The classifier names no
provider; curating a new provider is a data change, never a code change.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import StrEnum

# The synthetic no-auth path: a connection with this auth_type is keyless.
NO_AUTH = "none"


class Billing(StrEnum):
    SUBSCRIPTION = "subscription"
    METERED = "metered"
    KEYLESS = "keyless"
    UNKNOWN = "unknown"


class Overage(StrEnum):
    HARD_STOP = "hard-stop"
    METERS_TO_PAID = "meters-to-paid"
    UNKNOWN = "unknown"


@dataclass(frozen=True, slots=True)
class CatalogRow:
    """One curated catalog entry, as plain data."""

    id: int
    provider: str
    auth_type: str | None
    billing: Billing
    overage: Overage
    reason: str


@dataclass(frozen=True, slots=True)
class BillingVerdict:
    """How one connection bills, and which catalog entry (if any) decided it."""

    billing: Billing
    overage: Overage
    reason: str
    catalog_entry_id: int | None

    @property
    def is_plan_included(self) -> bool:
        """True for subscription and keyless billing; uncurated is never plan-included."""
        return self.billing in (Billing.SUBSCRIPTION, Billing.KEYLESS)

    @property
    def is_overage_safe(self) -> bool:
        """True only for a hard stop; unknown overage counts as meters-to-paid."""
        return self.overage is Overage.HARD_STOP

    @property
    def is_uncurated(self) -> bool:
        """True when no catalog entry matched (billing unknown)."""
        return self.billing is Billing.UNKNOWN


KEYLESS_VERDICT = BillingVerdict(
    billing=Billing.KEYLESS,
    overage=Overage.HARD_STOP,
    reason="The no-auth path is keyless: it has no account that could bill.",
    catalog_entry_id=None,
)

UNCURATED_VERDICT = BillingVerdict(
    billing=Billing.UNKNOWN,
    overage=Overage.UNKNOWN,
    reason="No catalog entry matches this provider: uncurated is treated as metered.",
    catalog_entry_id=None,
)


def normalise_auth_type(auth_type: str) -> str:
    """An auth type as stored and looked up: trimmed, lower-cased."""
    return auth_type.strip().lower()


def normalise_provider(provider: str, aliases: Mapping[str, str]) -> str:
    """A provider id as stored and looked up: trimmed, lower-cased, then mapped through
    the provider aliases (one level: an alias names a provider, never another alias)."""
    name = provider.strip().lower()
    return aliases.get(name, name)


class Catalog:
    """An index over catalog rows for first-match classification in O(1), with the
    provider aliases: every lookup normalises the provider id first, so a connection
    stored under an alias before the alias existed classifies as its provider."""

    __slots__ = ("_by_auth", "_provider_wide", "aliases")

    def __init__(
        self, rows: Iterable[CatalogRow], aliases: Mapping[str, str] | None = None
    ) -> None:
        self.aliases: Mapping[str, str] = dict(aliases or {})
        self._by_auth: dict[tuple[str, str], CatalogRow] = {}
        self._provider_wide: dict[str, CatalogRow] = {}
        for row in rows:
            if row.auth_type is None:
                self._provider_wide.setdefault(row.provider, row)
            else:
                self._by_auth.setdefault((row.provider, row.auth_type), row)

    def provider_id(self, provider: str) -> str:
        """`normalise_provider` with this catalog's aliases (no query)."""
        return normalise_provider(provider, self.aliases)

    def classify(self, provider: str, auth_type: str | None) -> BillingVerdict:
        """Classify one connection; first match wins (no-auth, exact, provider-wide, none)."""
        provider = self.provider_id(provider)
        if auth_type is not None:
            auth_type = normalise_auth_type(auth_type)
        if auth_type == NO_AUTH:
            return KEYLESS_VERDICT
        row = None
        if auth_type is not None:
            row = self._by_auth.get((provider, auth_type))
        if row is None:
            row = self._provider_wide.get(provider)
        if row is None:
            return UNCURATED_VERDICT
        return BillingVerdict(
            billing=row.billing,
            overage=row.overage,
            reason=row.reason,
            catalog_entry_id=row.id,
        )


def classify_connection(
    provider: str, auth_type: str | None, rows: Iterable[CatalogRow]
) -> BillingVerdict:
    """Classify one connection against catalog rows (convenience over `Catalog`)."""
    return Catalog(rows).classify(provider, auth_type)
