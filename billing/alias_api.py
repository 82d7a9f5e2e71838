"""REST endpoints of the provider aliases (read: gateway; write: operator), mounted on
the billing router (spec/api.md, "Provider aliases")."""

from __future__ import annotations

from django.http import HttpRequest
from ninja import Router, Schema, Status
from pydantic import ConfigDict

from billing import services
from billing.models import ProviderAlias
from billing.schemas import Detail, ProviderStr, WriteSchema
from ladder.services import aliases as ladder_aliases
from omniroute_admin.auth import actor_of, gateway_auth, operator_auth
from omniroute_admin.errors import BODY_ERRORS, GATEWAY_ERRORS, OPERATOR_ERRORS

router = Router(tags=["catalog and prices"])


class AliasIn(WriteSchema):
    provider: ProviderStr

    model_config = ConfigDict(
        extra="forbid", json_schema_extra={"examples": [{"provider": "claude"}]}
    )


class AliasOut(Schema):
    alias: str
    provider: str


@router.get(
    "/provider-aliases",
    response={200: list[AliasOut], **GATEWAY_ERRORS},
    auth=gateway_auth,
    summary="List the provider aliases",
)
def list_aliases(request: HttpRequest) -> list[ProviderAlias]:
    """Every alias and the provider id it names, by alias. Every provider id a write or
    a lookup carries is trimmed, lower-cased, then mapped through these."""
    return list(ProviderAlias.objects.all())


@router.put(
    "/provider-aliases/{alias}",
    response={200: AliasOut, 409: Detail, **BODY_ERRORS, **OPERATOR_ERRORS},
    auth=operator_auth,
    summary="Create or replace a provider alias",
)
def put_alias(request: HttpRequest, alias: str, payload: AliasIn) -> object:
    """Map `alias` onto `provider` (both trimmed and lower-cased). 409 when the alias is
    itself a provider with catalog entries; 422 when the provider is itself an alias or
    the alias is the provider of other aliases (no chains). Audited; warm processes
    reclassify at once (the config counter moves)."""
    row, _ = ladder_aliases.put_alias(
        services.AliasInput(alias=alias, provider=payload.provider), actor=actor_of(request)
    )
    return row


@router.delete(
    "/provider-aliases/{alias}",
    response={204: None, 404: Detail, **OPERATOR_ERRORS},
    auth=operator_auth,
    summary="Delete a provider alias",
)
def delete_alias(request: HttpRequest, alias: str) -> object:
    """Delete an alias (audited): the name is its own provider id again."""
    ladder_aliases.delete_alias(alias, actor=actor_of(request))
    return Status(204, None)
