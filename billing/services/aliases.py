"""Provider aliases: the map every provider id goes through on a write or a lookup
(trimmed, lower-cased, then an alias replaced by its provider), and the checks of an
alias write. The write itself re-resolves the ladder's registrations in its transaction,
so it is the ladder's shell's (`ladder/services/aliases.py`)."""

from __future__ import annotations

from dataclasses import dataclass

from django.core.exceptions import ValidationError
from django.db import connection

from billing.classify import normalise_provider
from billing.models import (
    PROVIDER_MAX_LENGTH,
    BillingCatalogEntry,
    ChangeCounter,
    ProviderAlias,
)
from billing.services.common import Conflict, _clean_text


class AliasNotFound(ProviderAlias.DoesNotExist):
    """No alias of this name (a DoesNotExist that names it)."""


@dataclass(frozen=True, slots=True)
class AliasInput:
    alias: str
    provider: str


def load_aliases() -> dict[str, str]:
    """The whole alias map, alias -> provider (one query)."""
    return dict(ProviderAlias.objects.values_list("alias", "provider"))


def provider_id(provider: str) -> str:
    """A provider id normalised with the stored aliases (one query). The hot paths use
    their cached snapshot's catalog instead (`Catalog.provider_id`, no query)."""
    return normalise_provider(provider, load_aliases())


def resolve_for_write(name: str) -> str:
    """Inside the caller's transaction, which then writes a row registered under `name`
    (trimmed, lower-cased): the provider id it resolves to now. On PostgreSQL the
    `config` counter is read with a share lock first, so no alias write (each moves it)
    commits between this lookup and the caller's commit: either the row sees the alias
    write, or the alias write, waiting for the lock, sees the row and resolves it again
    (`_resolve_registrations`). Two queries."""
    if connection.vendor == "postgresql":
        quote = connection.ops.quote_name
        with connection.cursor() as cursor:
            cursor.execute(
                f"SELECT 1 FROM {quote(ChangeCounter._meta.db_table)} "
                f"WHERE {quote('name')} = %s FOR SHARE",
                [ChangeCounter.CONFIG],
            )
    return normalise_provider(name, load_aliases())


def alias_snapshot(row: ProviderAlias) -> dict[str, str]:
    return {"alias": row.alias, "provider": row.provider}


def clean_alias_names(data: AliasInput) -> AliasInput:
    """Both names trimmed, lower-cased and checked as text; ValidationError otherwise."""
    errors: dict[str, list[str]] = {}
    alias = _clean_text(data.alias, "alias", PROVIDER_MAX_LENGTH, errors).lower()
    provider = _clean_text(data.provider, "provider", PROVIDER_MAX_LENGTH, errors).lower()
    if errors:
        raise ValidationError(errors)
    return AliasInput(alias, provider)


def clean_alias_input(data: AliasInput) -> AliasInput:
    """Trimmed, lower-cased and checked; ValidationError naming each field. The target
    must be a provider, not another alias (one level, no chains)."""
    data = clean_alias_names(data)
    alias, provider = data.alias, data.provider
    errors: dict[str, list[str]] = {}
    if alias == provider:
        errors["provider"] = ["An alias cannot name itself."]
    else:
        aliases = load_aliases()
        if provider in aliases:
            errors["provider"] = [
                f"{provider!r} is itself an alias (of {aliases[provider]!r}): name the provider."
            ]
        pointing = sorted(a for a, p in aliases.items() if p == alias)
        if pointing:
            errors["alias"] = [
                f"{alias!r} is the provider of the aliases {', '.join(pointing)}: "
                "an alias of it would chain them."
            ]
    if errors:
        raise ValidationError(errors)
    return data


def refuse_catalog_provider(alias: str) -> None:
    """Conflict when `alias` is a provider with catalog entries (an alias would hide them)."""
    if BillingCatalogEntry.objects.filter(provider=alias).exists():
        raise Conflict(f"{alias!r} is a provider with catalog entries: it cannot be an alias.")
