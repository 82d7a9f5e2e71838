"""Provider aliases: the seeded map, its audited writes (409, 422), the endpoints' scopes,
and the normalisation of every provider id and auth type on every write path and lookup."""

from __future__ import annotations

import json
from decimal import Decimal
from io import StringIO
from pathlib import Path
from typing import Any

import pytest
from django.core.exceptions import ValidationError
from django.core.management import call_command
from django.db import connection
from django.test.utils import CaptureQueriesContext

from billing import services
from billing.classify import Catalog, normalise_auth_type, normalise_provider
from billing.models import AuditEntry, ChangeCounter, ModelPrice, ProviderAlias
from ladder import services as ladder_services
from ladder.core import parse_auto_id
from ladder.models import ApiToken, Candidate, Connection, SpendEntry
from ladder.services import aliases as ladder_aliases
from tests.ladder.factories import api, make_connection, make_token

pytestmark = pytest.mark.django_db

DATA = Path(__file__).parent / "data"


def config_version() -> int:
    return services.change_counters()[0]


def test_the_migration_seeds_litellm_names_for_the_curated_providers() -> None:
    assert list(ProviderAlias.objects.values_list("alias", "provider")) == [
        ("anthropic", "claude"),
        ("chatgpt", "codex"),
        ("github_copilot", "copilot"),
    ]
    assert set(ProviderAlias.objects.values_list("updated_by", flat=True)) == {
        "migration billing.0007"
    }
    assert not AuditEntry.objects.filter(target_type="provider_alias").exists()


def test_normalise_trims_lowercases_and_maps_one_level() -> None:
    aliases = {"anthropic": "claude"}
    assert normalise_provider("  Anthropic ", aliases) == "claude"
    assert normalise_provider("CLAUDE", aliases) == "claude"
    assert normalise_provider("Mistral", aliases) == "mistral"
    assert normalise_auth_type(" OAuth ") == "oauth"
    catalog = Catalog([], aliases)
    assert catalog.provider_id("ANTHROPIC") == "claude"


def test_put_alias_audits_and_moves_the_config_counter() -> None:
    before = config_version()
    row, created = ladder_aliases.put_alias(
        services.AliasInput(" Mistral_AI ", "Mistral"), actor="ops"
    )
    assert (row.alias, row.provider, created) == ("mistral_ai", "mistral", True)
    assert config_version() == before + 1
    audit = AuditEntry.objects.filter(target_type="provider_alias", target_id="mistral_ai").get()
    assert (audit.action, audit.actor, audit.before, audit.after) == (
        "create",
        "ops",
        None,
        {"alias": "mistral_ai", "provider": "mistral"},
    )
    ladder_aliases.put_alias(services.AliasInput("mistral_ai", "mistral2"), actor="ops")
    ladder_aliases.delete_alias("MISTRAL_AI", actor="ops2")
    assert list(
        AuditEntry.objects.filter(target_type="provider_alias", target_id="mistral_ai")
        .order_by("id")
        .values_list("action", "actor", "before", "after")
    ) == [
        ("create", "ops", None, {"alias": "mistral_ai", "provider": "mistral"}),
        (
            "update",
            "ops",
            {"alias": "mistral_ai", "provider": "mistral"},
            {"alias": "mistral_ai", "provider": "mistral2"},
        ),
        ("delete", "ops2", {"alias": "mistral_ai", "provider": "mistral2"}, None),
    ]
    assert config_version() == before + 3


def test_the_same_alias_again_records_nothing() -> None:
    before = config_version()
    audits = AuditEntry.objects.count()
    ladder_aliases.put_alias(services.AliasInput("anthropic", "claude"), actor="ops")
    assert (config_version(), AuditEntry.objects.count()) == (before, audits)


def test_an_alias_that_is_a_provider_with_catalog_entries_is_a_conflict() -> None:
    with pytest.raises(services.Conflict, match="'claude' is a provider with catalog entries"):
        ladder_aliases.put_alias(services.AliasInput("Claude", "anthropic-api"), actor="ops")
    assert not ProviderAlias.objects.filter(alias="claude").exists()


@pytest.mark.parametrize(
    ("alias", "provider", "field", "message"),
    [
        ("x", "x", "provider", "An alias cannot name itself."),
        ("foo", "anthropic", "provider", "'anthropic' is itself an alias (of 'claude')"),
        ("mistral", "x", "alias", "'mistral' is the provider of the aliases mistral_ai"),
        ("", "claude", "alias", None),
        ("a" * 65, "claude", "alias", None),
        ("bad\x00", "claude", "alias", None),
    ],
)
def test_bad_aliases_are_refused(alias: str, provider: str, field: str, message: Any) -> None:
    ladder_aliases.put_alias(services.AliasInput("mistral_ai", "mistral"), actor="ops")
    with pytest.raises(ValidationError) as refused:
        ladder_aliases.put_alias(services.AliasInput(alias, provider), actor="ops")
    errors = refused.value.message_dict
    assert field in errors
    if message is not None:
        assert errors[field][0].startswith(message)


def test_the_endpoints_read_with_gateway_scope_and_write_with_operator_scope() -> None:
    gateway = make_token("gw", ApiToken.Scope.GATEWAY)
    operator = make_token("op", ApiToken.Scope.OPERATOR)
    listed = api("get", "/api/v1/provider-aliases", gateway)
    assert listed.status_code == 200
    assert listed.json() == [
        {"alias": "anthropic", "provider": "claude"},
        {"alias": "chatgpt", "provider": "codex"},
        {"alias": "github_copilot", "provider": "copilot"},
    ]
    assert (
        api("put", "/api/v1/provider-aliases/gemini", gateway, {"provider": "x"}).status_code == 403
    )
    put = api("put", "/api/v1/provider-aliases/Gemini", operator, {"provider": " Antigravity "})
    assert (put.status_code, put.json()) == (200, {"alias": "gemini", "provider": "antigravity"})
    assert (
        AuditEntry.objects.get(target_type="provider_alias", target_id="gemini").actor == "token:op"
    )
    conflict = api("put", "/api/v1/provider-aliases/copilot", operator, {"provider": "x"})
    assert conflict.status_code == 409
    assert conflict.json() == {
        "detail": "'copilot' is a provider with catalog entries: it cannot be an alias."
    }
    extra = api("put", "/api/v1/provider-aliases/y", operator, {"provider": "x", "more": 1})
    assert extra.status_code == 422
    chain = api("put", "/api/v1/provider-aliases/y", operator, {"provider": "anthropic"})
    assert chain.status_code == 422
    assert api("delete", "/api/v1/provider-aliases/gemini", gateway).status_code == 403
    assert api("delete", "/api/v1/provider-aliases/gemini", operator).status_code == 204
    assert api("delete", "/api/v1/provider-aliases/gemini", operator).status_code == 404


def test_connections_are_stored_normalised_and_classified_through_aliases() -> None:
    gateway = make_token("gw", ApiToken.Scope.GATEWAY)
    put = api(
        "put",
        "/api/v1/connections/plan-a",
        gateway,
        {"provider": " Anthropic ", "auth_type": " OAuth"},
    )
    assert put.status_code == 200
    stored = Connection.objects.get(connection_id="plan-a")
    assert (stored.provider, stored.auth_type) == ("claude", "oauth")
    # A row stored under the alias before the alias existed classifies as its provider.
    Connection.objects.filter(connection_id="plan-a").update(provider="anthropic")
    catalog = services.load_catalog()
    assert catalog.classify("anthropic", "OAUTH").billing == "subscription"


def test_candidates_prices_and_spend_are_stored_normalised() -> None:
    gateway = make_token("gw", ApiToken.Scope.GATEWAY)
    operator = make_token("op", ApiToken.Scope.OPERATOR)
    make_connection("plan-a")
    candidate = api(
        "post",
        "/api/v1/candidates",
        gateway,
        {"provider": "ANTHROPIC", "model": "claude-sonnet-4-5", "connection_id": "plan-a"},
    )
    assert candidate.status_code == 201
    assert candidate.json()["provider"] == "claude"
    assert Candidate.objects.get().provider == "claude"
    price = api(
        "post",
        "/api/v1/prices",
        operator,
        {
            "provider": "Anthropic",
            "model": "claude-sonnet-4-5",
            "input_usd_per_mtok": 3,
            "output_usd_per_mtok": 15,
        },
    )
    assert (price.status_code, price.json()["provider"]) == (201, "claude")
    page = api("get", "/api/v1/prices?provider=anthropic", gateway)
    assert [row["provider"] for row in page.json()] == ["claude"]
    spend = api(
        "post",
        "/api/v1/spend",
        gateway,
        {
            "request_id": "r1",
            "connection_id": "plan-a",
            "provider": "anthropic",
            "model": "claude-sonnet-4-5",
            "cost_usd": None,
            "input_tokens": 1_000_000,
            "output_tokens": 0,
        },
    )
    assert spend.status_code == 201
    assert spend.json()["provider"] == "claude"
    assert spend.json()["rung"] == "subscription"
    assert SpendEntry.objects.get().list_price_usd == Decimal("3.00000000")
    catalog = api(
        "post",
        "/api/v1/catalog",
        operator,
        {
            "provider": "GitHub_Copilot",
            "auth_type": "OAuth",
            "billing": "subscription",
            "overage": "unknown",
            "reason": "seat",
        },
    )
    assert catalog.status_code == 201
    assert (catalog.json()["provider"], catalog.json()["auth_type"]) == ("copilot", "oauth")


def test_a_pool_post_body_is_normalised_with_no_extra_query() -> None:
    make_connection("plan-a")
    ladder_services.store_reading("plan-a", ladder_services.ReadingInput(remaining_percent=80.0))
    gateway = make_token("gw", ApiToken.Scope.GATEWAY)
    body = {
        "candidates": [
            {
                "provider": " Anthropic",
                "model": "claude-sonnet-4-5",
                "connection_id": "plan-a",
                "ref": "dep-1",
            }
        ]
    }
    answer = api("post", "/api/v1/pools/auto/subscription", gateway, body)
    assert answer.status_code == 200
    assert answer.json()["candidates"] == [
        {
            "id": None,
            "ref": "dep-1",
            "provider": "claude",
            "model": "claude-sonnet-4-5",
            "rung": "subscription",
            "connection_id": "plan-a",
            "allowed_connection_ids": None,
        }
    ]
    assert parse_auto_id("auto/subscription").grouping == "subscription"

    def queries(provider: str) -> int:
        ladder_services.clear_caches()
        api("post", "/api/v1/pools/auto/thrifty", gateway, body)  # warm the snapshot
        fresh = {"candidates": [{**body["candidates"][0], "provider": provider, "model": "n"}]}
        with CaptureQueriesContext(connection) as captured:
            assert api("post", "/api/v1/pools/auto/thrifty", gateway, fresh).status_code == 200
        return len(captured)

    assert queries("ANTHROPIC ") == queries("claude")


def test_import_maps_litellm_providers_through_the_aliases_and_map_is_a_fallback(
    tmp_path: Path,
) -> None:
    data = json.loads((DATA / "prices_small.json").read_text())
    data["mistral-small"] = {
        "input_cost_per_token": 1e-07,
        "output_cost_per_token": 3e-07,
        "litellm_provider": "Mistral",
        "mode": "chat",
    }
    path = tmp_path / "prices.json"
    path.write_text(json.dumps(data))
    call_command(
        "import_prices",
        str(path),
        "--map",
        "mistral=my-mistral",
        "--map",
        "anthropic=ignored",  # the alias wins: --map is the fallback
        stdout=StringIO(),
    )
    assert list(
        ModelPrice.objects.order_by("provider", "model").values_list("provider", "model")
    ) == [
        ("claude", "claude-sonnet-4-5"),
        ("my-mistral", "mistral-small"),
        ("openai", "gpt-4o"),
        ("openai", "gpt-4o-mini"),
    ]


def test_an_alias_write_reaches_warm_processes_through_the_config_counter() -> None:
    snapshot = ladder_services.current_snapshot(config_version())
    assert snapshot.catalog.provider_id("gemini") == "gemini"
    ladder_aliases.put_alias(services.AliasInput("gemini", "antigravity"), actor="ops")
    assert config_version() != snapshot.config_version
    fresh = ladder_services.current_snapshot(config_version())
    assert fresh.catalog.provider_id("Gemini") == "antigravity"
    assert ChangeCounter.objects.get(name="config").value == config_version()
