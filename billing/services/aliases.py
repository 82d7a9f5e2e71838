"""Provider aliases: the map every provider id goes through on a write or a lookup
(trimmed, lower-cased, then an alias replaced by its provider), and its audited writes.
An alias changes how connections classify, so each write moves the `config` counter."""

from __future__ import annotations

from dataclasses import dataclass

from django.core.exceptions import ValidationError
from django.db import IntegrityError, connection, transaction

from billing.bounds import text_problem
from billing.classify import normalise_provider
from billing.models import (
    PROVIDER_MAX_LENGTH,
    AuditEntry,
    BillingCatalogEntry,
    ChangeCounter,
    ProviderAlias,
)
from billing.services.audit import record_audit
from billing.services.common import Conflict, _clean_text
from billing.services.counters import bump


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


def _resolve_registrations(alias: str, actor: str) -> int:
    """After an alias write, in its transaction: the connections and candidates
    registered under `alias` resolve it again (ladder.services.registry)."""
    from ladder.services.registry import resolve_registered_providers

    return resolve_registered_providers(alias, load_aliases(), actor=actor)


def _snapshot(row: ProviderAlias) -> dict[str, str]:
    return {"alias": row.alias, "provider": row.provider}


def _clean_names(data: AliasInput) -> AliasInput:
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
    data = _clean_names(data)
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


def _refuse_catalog_provider(alias: str) -> None:
    if BillingCatalogEntry.objects.filter(provider=alias).exists():
        raise Conflict(f"{alias!r} is a provider with catalog entries: it cannot be an alias.")


def put_alias(data: AliasInput, *, actor: str) -> tuple[ProviderAlias, bool]:
    """Create or replace an alias with its audit row; (row, created). Conflict when the
    alias is itself a provider with catalog entries (it would hide them): checked after
    the text, before the rules between aliases."""
    _refuse_catalog_provider(_clean_names(data).alias)
    data = clean_alias_input(data)
    with transaction.atomic():
        _refuse_catalog_provider(data.alias)  # written meanwhile
        row = ProviderAlias.objects.select_for_update().filter(alias=data.alias).first()
        created = row is None
        before = None if row is None else _snapshot(row)
        if row is None:
            row = ProviderAlias(alias=data.alias)
        elif row.provider == data.provider:
            return row, False  # the same alias again: nothing to record
        row.provider = data.provider
        row.updated_by = actor
        try:
            with transaction.atomic():
                row.save()
        except IntegrityError as error:  # created concurrently
            raise Conflict(f"The alias {data.alias!r} was just written; retry.") from error
        bump(ChangeCounter.CONFIG)
        _resolve_registrations(row.alias, actor)
        record_audit(
            target_type="provider_alias",
            target_id=row.alias,
            action=AuditEntry.Action.CREATE if created else AuditEntry.Action.UPDATE,
            actor=actor,
            before=before,
            after=_snapshot(row),
        )
    return row, created


def delete_alias(alias: str, *, actor: str) -> None:
    """Delete an alias with its audit row; AliasNotFound when there is none (or when
    the name could not be one)."""
    name = alias.strip().lower()
    if text_problem(name, PROVIDER_MAX_LENGTH) is not None:
        raise AliasNotFound(f"No provider alias {name!r}.")
    with transaction.atomic():
        row = ProviderAlias.objects.select_for_update().filter(alias=name).first()
        if row is None:
            raise AliasNotFound(f"No provider alias {name!r}.")
        before = _snapshot(row)
        row.delete()
        bump(ChangeCounter.CONFIG)
        _resolve_registrations(name, actor)
        record_audit(
            target_type="provider_alias",
            target_id=name,
            action=AuditEntry.Action.DELETE,
            actor=actor,
            before=before,
            after=None,
        )
