"""Auto ids: auto/subscription, auto/thrifty and auto/<category>:<tier>, parsed and named."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Final

from ladder.core.types import Grouping

AUTO_PREFIX: Final = "auto/"
KNOWN_TIERS: Final[tuple[str, ...]] = tuple(grouping.value for grouping in Grouping)
# A category is a short slug; the colon is reserved as the category/tier separator.
_CATEGORY_PATTERN: Final = re.compile(r"[A-Za-z0-9._-]{1,64}")
_CATEGORY_RULE: Final = "1 to 64 of A-Z a-z 0-9 . _ -"


class InvalidAutoId(ValueError):
    """Base of the auto id parsing errors."""


class NotAnAutoId(InvalidAutoId):
    """The value is not shaped like one of this product's auto ids."""

    def __init__(self, value: str, why: str) -> None:
        self.value = value
        self.why = why
        super().__init__(
            f"{value!r} is not an auto id ({why}); expected auto/subscription, "
            "auto/thrifty or auto/<category>:<tier>"
        )


class UnknownTier(InvalidAutoId):
    """The auto id names a tier other than the known ones."""

    def __init__(self, tier: str, known: tuple[str, ...] = KNOWN_TIERS) -> None:
        self.tier = tier
        self.known = known
        super().__init__(f"unknown tier {tier!r}: known tiers are {', '.join(known)}")


@dataclass(frozen=True, slots=True)
class AutoId:
    """A parsed auto id: a grouping, optionally composed with a category."""

    grouping: Grouping
    category: str | None = None

    def __post_init__(self) -> None:
        if self.category is not None and not _CATEGORY_PATTERN.fullmatch(self.category):
            raise NotAnAutoId(
                f"{AUTO_PREFIX}{self.category}:{self.grouping}",
                f"the category must be {_CATEGORY_RULE}",
            )

    @property
    def auto_id(self) -> str:
        """The canonical string: auto/<tier> or auto/<category>:<tier>."""
        if self.category is None:
            return f"{AUTO_PREFIX}{self.grouping}"
        return f"{AUTO_PREFIX}{self.category}:{self.grouping}"

    @property
    def fail_mode(self) -> str:
        """How ambiguity is treated: subscription fails "closed", thrifty fails "open"."""
        return "closed" if self.grouping == Grouping.SUBSCRIPTION else "open"

    def __str__(self) -> str:
        return self.auto_id


SUBSCRIPTION_AUTO_ID: Final = AutoId(Grouping.SUBSCRIPTION)
THRIFTY_AUTO_ID: Final = AutoId(Grouping.THRIFTY)
# Only the flat ids are advertised; category composites are accepted, not listed.
ADVERTISED_AUTO_IDS: Final = (SUBSCRIPTION_AUTO_ID, THRIFTY_AUTO_ID)


def parse_auto_id(value: str) -> AutoId:
    """Parse auto/subscription, auto/thrifty or auto/<category>:<tier>."""
    if not value.startswith(AUTO_PREFIX):
        raise NotAnAutoId(value, f"it does not start with {AUTO_PREFIX!r}")
    rest = value[len(AUTO_PREFIX) :]
    if not rest:
        raise NotAnAutoId(value, f"nothing follows {AUTO_PREFIX!r}")
    category_text, colon, tier = rest.rpartition(":")
    category: str | None = None
    if colon:
        if not _CATEGORY_PATTERN.fullmatch(category_text):
            raise NotAnAutoId(value, f"the category must be {_CATEGORY_RULE}")
        category = category_text
    # A flat id that is not a known tier (auto/coding) is an unknown tier: the error
    # names the known tiers, which is what the caller needs to fix it.
    try:
        grouping = Grouping(tier)
    except ValueError:
        raise UnknownTier(tier) from None
    return AutoId(grouping, category)
