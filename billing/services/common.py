"""What the billing services share: their errors and the text check of a write."""

from __future__ import annotations

from billing.bounds import text_problem
from billing.models import (
    BillingCatalogEntry,
    ModelPrice,
)


class Conflict(Exception):
    """A write would break a uniqueness rule or overwrite a newer version; nothing changed."""


class CatalogEntryNotFound(BillingCatalogEntry.DoesNotExist):
    """No catalog entry has this id (a DoesNotExist that names it)."""


class PriceNotFound(ModelPrice.DoesNotExist):
    """No price row has this id (a DoesNotExist that names it)."""


def _clean_text(
    value: str,
    field: str,
    max_length: int,
    errors: dict[str, list[str]],
    *,
    multiline: bool = False,
) -> str:
    text = value.strip()
    # Line breaks and tabs are fine in a free-text reason, never in a name.
    checked = text.translate(_WHITESPACE_AS_SPACE) if multiline else text
    problem = text_problem(checked, max_length)
    if problem is not None:
        errors.setdefault(field, []).append(problem)
    return text


_WHITESPACE_AS_SPACE = str.maketrans("\t\n\r", "   ")
