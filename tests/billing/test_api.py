"""The billing REST API: catalog and prices, auth and scopes, refusals that change nothing."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest
from django.core.exceptions import ValidationError
from django.test import Client

from billing import services
from billing.models import AuditEntry, BillingCatalogEntry, ModelPrice
from ladder.models import ApiToken
from ladder.tokens import revoke_token
from tests.billing.factories import make_catalog_entry, make_price
from tests.ladder.factories import api, iso, make_token

pytestmark = pytest.mark.django_db

OPENAI = {
    "provider": "openai",
    "auth_type": "apikey",
    "billing": "metered",
    "overage": "meters-to-paid",
    "reason": "Pay per token, no plan",
}


@pytest.fixture
def gateway() -> str:
    return make_token("gw", ApiToken.Scope.GATEWAY)


@pytest.fixture
def operator() -> str:
    return make_token("ops", ApiToken.Scope.OPERATOR)


def entry_json(entry: BillingCatalogEntry) -> dict[str, Any]:
    entry.refresh_from_db()
    return {
        "id": entry.pk,
        "provider": entry.provider,
        "auth_type": entry.auth_type,
        "billing": entry.billing,
        "overage": entry.overage,
        "reason": entry.reason,
        "version": entry.version,
        "updated_at": iso(entry.updated_at),
        "updated_by": entry.updated_by,
    }


def catalog_rows() -> list[tuple[Any, ...]]:
    return list(
        BillingCatalogEntry.objects.order_by("pk").values_list(
            "pk", "provider", "auth_type", "billing", "overage", "reason", "version"
        )
    )


def make_entry(**fields: Any) -> BillingCatalogEntry:
    data = {**OPENAI, **fields}
    return make_catalog_entry(
        data["provider"], data["auth_type"], data["billing"], data["overage"], data["reason"]
    )


def price_rows() -> list[tuple[Any, ...]]:
    return list(
        ModelPrice.objects.order_by("pk").values_list(
            "pk", "provider", "model", "input_usd_per_mtok", "output_usd_per_mtok", "tier_override"
        )
    )


# --- auth -------------------------------------------------------------------------------


def test_a_request_without_a_token_is_401() -> None:
    response = api("get", "/api/v1/catalog")

    assert response.status_code == 401
    assert response.json() == {"detail": "Unauthorized"}


def test_a_request_with_an_unknown_token_is_401() -> None:
    response = api("get", "/api/v1/catalog", "omr_not-a-token-anyone-was-given")

    assert response.status_code == 401
    assert response.json() == {"detail": "Unauthorized"}


def test_a_request_with_a_revoked_token_is_401() -> None:
    secret = make_token("old", ApiToken.Scope.OPERATOR)
    revoke_token(ApiToken.objects.get(name="old").pk)

    response = api("get", "/api/v1/catalog", secret)

    assert response.status_code == 401
    assert response.json() == {"detail": "Unauthorized"}


def test_a_token_sent_with_another_scheme_is_401(gateway: str) -> None:
    response = Client().get("/api/v1/catalog", HTTP_AUTHORIZATION=f"Token {gateway}")

    assert response.status_code == 401
    assert response.json() == {"detail": "Unauthorized"}


def test_a_gateway_token_on_a_catalog_write_is_403_before_the_body_is_validated(
    gateway: str,
) -> None:
    before = catalog_rows()

    response = api("post", "/api/v1/catalog", gateway, {"provider": 42, "colour": "red"})

    assert response.status_code == 403
    assert response.json() == {"detail": "This endpoint needs a token with the operator scope."}
    assert catalog_rows() == before


def test_a_gateway_token_on_a_price_write_is_403_before_the_body_is_validated(
    gateway: str,
) -> None:
    response = api("post", "/api/v1/prices", gateway, raw="{not json")

    assert response.status_code == 403
    assert response.json() == {"detail": "This endpoint needs a token with the operator scope."}
    assert price_rows() == []


def test_a_gateway_token_cannot_delete_a_catalog_entry(gateway: str) -> None:
    entry = make_entry()

    response = api("delete", f"/api/v1/catalog/{entry.pk}", gateway)

    assert response.status_code == 403
    assert BillingCatalogEntry.objects.filter(pk=entry.pk).exists()


# --- catalog reads -------------------------------------------------------------------------


def test_list_catalog_returns_every_entry_ordered_by_provider_and_auth_type(
    gateway: str,
) -> None:
    make_entry()

    response = api("get", "/api/v1/catalog", gateway)

    assert response.status_code == 200
    assert response.json() == [entry_json(e) for e in BillingCatalogEntry.objects.all()]
    assert [(e["provider"], e["auth_type"]) for e in response.json()] == [
        ("antigravity", "oauth"),
        ("claude", "oauth"),
        ("codex", "oauth"),
        ("copilot", "apikey"),
        ("cursor", "oauth"),
        ("devin-desktop", "oauth"),
        ("openai", "apikey"),
    ]


def test_get_catalog_entry_returns_it(gateway: str) -> None:
    entry = make_entry()

    response = api("get", f"/api/v1/catalog/{entry.pk}", gateway)

    assert response.status_code == 200
    assert response.json() == {
        "id": entry.pk,
        "provider": "openai",
        "auth_type": "apikey",
        "billing": "metered",
        "overage": "meters-to-paid",
        "reason": "Pay per token, no plan",
        "version": 1,
        "updated_at": iso(entry.updated_at),
        "updated_by": "setup",
    }


def test_get_unknown_catalog_entry_is_404(gateway: str) -> None:
    response = api("get", "/api/v1/catalog/999999", gateway)

    assert response.status_code == 404
    assert response.json() == {"detail": "No catalog entry 999999."}


def test_get_catalog_entry_with_an_out_of_range_id_is_404_not_500(gateway: str) -> None:
    response = api("get", "/api/v1/catalog/99999999999999999999999999", gateway)

    assert response.status_code == 404
    assert response.json() == {"detail": "No catalog entry 99999999999999999999999999."}


def test_get_catalog_entry_with_a_non_integer_id_is_404(gateway: str) -> None:
    response = api("get", "/api/v1/catalog/abc", gateway)

    assert response.status_code == 404


# --- catalog writes ------------------------------------------------------------------------


def test_create_catalog_entry_answers_201_with_the_stored_entry(operator: str) -> None:
    response = api("post", "/api/v1/catalog", operator, OPENAI)

    entry = BillingCatalogEntry.objects.get(provider="openai")
    assert response.status_code == 201
    assert response.json() == entry_json(entry)
    assert (entry.auth_type, entry.billing, entry.overage, entry.version, entry.updated_by) == (
        "apikey",
        "metered",
        "meters-to-paid",
        1,
        "token:ops",
    )


def test_create_catalog_entry_writes_an_audit_row_naming_the_token(operator: str) -> None:
    response = api("post", "/api/v1/catalog", operator, OPENAI)

    audit = AuditEntry.objects.get()
    assert (audit.target_type, audit.target_id, audit.action, audit.actor) == (
        "catalog",
        str(response.json()["id"]),
        "create",
        "token:ops",
    )
    assert audit.before is None
    assert audit.after == {k: v for k, v in OPENAI.items()}


def test_create_provider_wide_entry_stores_a_null_auth_type(operator: str) -> None:
    response = api("post", "/api/v1/catalog", operator, {**OPENAI, "auth_type": None})

    assert response.status_code == 201
    assert response.json()["auth_type"] is None
    assert BillingCatalogEntry.objects.get(provider="openai").auth_type is None


def test_create_duplicate_catalog_entry_is_409_and_changes_nothing(operator: str) -> None:
    make_entry()
    before = catalog_rows()

    response = api("post", "/api/v1/catalog", operator, {**OPENAI, "reason": "again"})

    assert response.status_code == 409
    assert response.json() == {
        "detail": "An entry for provider 'openai' with auth type 'apikey' exists already."
    }
    assert catalog_rows() == before
    assert not AuditEntry.objects.filter(actor="token:ops").exists()


def test_create_duplicate_provider_wide_entry_is_409(operator: str) -> None:
    make_entry(auth_type=None)

    response = api("post", "/api/v1/catalog", operator, {**OPENAI, "auth_type": None})

    assert response.status_code == 409
    assert response.json() == {"detail": "A provider-wide entry for 'openai' exists already."}
    assert BillingCatalogEntry.objects.filter(provider="openai").count() == 1


def test_create_catalog_entry_refuses_unknown_fields(operator: str) -> None:
    before = catalog_rows()

    response = api("post", "/api/v1/catalog", operator, {**OPENAI, "colour": "red"})

    assert response.status_code == 422
    assert response.json() == {
        "detail": [
            {
                "type": "extra_forbidden",
                "loc": ["body", "payload", "colour"],
                "msg": "Extra inputs are not permitted",
            }
        ]
    }
    assert catalog_rows() == before


def test_create_catalog_entry_refuses_an_unknown_billing_class(operator: str) -> None:
    before = catalog_rows()

    response = api("post", "/api/v1/catalog", operator, {**OPENAI, "billing": "free"})

    assert response.status_code == 422
    assert [(e["loc"], e["type"]) for e in response.json()["detail"]] == [
        (["body", "payload", "billing"], "literal_error")
    ]
    assert catalog_rows() == before


def test_create_catalog_entry_refuses_a_blank_reason(operator: str) -> None:
    response = api("post", "/api/v1/catalog", operator, {**OPENAI, "reason": "   "})

    assert response.status_code == 422
    assert [(e["loc"], e["type"]) for e in response.json()["detail"]] == [
        (["body", "payload", "reason"], "string_too_short")
    ]
    assert not BillingCatalogEntry.objects.filter(provider="openai").exists()


def test_create_catalog_entry_refuses_a_missing_reason(operator: str) -> None:
    body = {k: v for k, v in OPENAI.items() if k != "reason"}

    response = api("post", "/api/v1/catalog", operator, body)

    assert response.status_code == 422
    assert response.json() == {
        "detail": [
            {"type": "missing", "loc": ["body", "payload", "reason"], "msg": "Field required"}
        ]
    }


def test_create_catalog_entry_refuses_the_no_auth_path(operator: str) -> None:
    response = api("post", "/api/v1/catalog", operator, {**OPENAI, "auth_type": "none"})

    assert response.status_code == 422
    assert response.json() == {
        "detail": [
            {
                "loc": ["body", "payload", "auth_type"],
                "msg": "The no-auth path ('none') is keyless by rule and never consults the "
                "catalog.",
                "type": "value_error",
            }
        ]
    }
    assert not BillingCatalogEntry.objects.filter(provider="openai").exists()


def test_create_catalog_entry_refuses_a_wrongly_typed_provider(operator: str) -> None:
    response = api("post", "/api/v1/catalog", operator, {**OPENAI, "provider": ["openai"]})

    assert response.status_code == 422
    assert [(e["loc"], e["type"]) for e in response.json()["detail"]] == [
        (["body", "payload", "provider"], "string_type")
    ]


def test_create_catalog_entry_with_malformed_json_is_400_json(operator: str) -> None:
    before = catalog_rows()

    response = api("post", "/api/v1/catalog", operator, raw='{"provider": "openai",')

    assert response.status_code == 400
    assert response.json() == {"detail": "Cannot parse request body"}
    assert catalog_rows() == before


def test_create_catalog_entry_with_a_json_array_body_is_422(operator: str) -> None:
    response = api("post", "/api/v1/catalog", operator, raw="[1, 2]")

    assert response.status_code == 422
    assert [(e["loc"], e["type"]) for e in response.json()["detail"]] == [
        (["body", "payload"], "model_attributes_type")
    ]


def test_put_catalog_entry_replaces_it_and_bumps_its_version(operator: str) -> None:
    entry = make_entry()

    response = api(
        "put",
        f"/api/v1/catalog/{entry.pk}",
        operator,
        {**OPENAI, "overage": "unknown", "reason": "Terms changed", "version": 1},
    )

    assert response.status_code == 200
    assert response.json() == entry_json(entry)
    assert (entry.overage, entry.reason, entry.version, entry.updated_by) == (
        "unknown",
        "Terms changed",
        2,
        "token:ops",
    )


def test_put_catalog_entry_audits_before_and_after(operator: str) -> None:
    entry = make_entry()

    api("put", f"/api/v1/catalog/{entry.pk}", operator, {**OPENAI, "reason": "Terms changed"})

    audit = AuditEntry.objects.get(actor="token:ops")
    assert (audit.target_type, audit.target_id, audit.action) == (
        "catalog",
        str(entry.pk),
        "update",
    )
    assert audit.before == OPENAI
    assert audit.after == {**OPENAI, "reason": "Terms changed"}


def test_put_catalog_entry_with_a_stale_version_is_409_and_changes_nothing(
    operator: str,
) -> None:
    entry = make_entry()
    services.update_catalog_entry(
        entry.pk,
        services.CatalogInput("openai", "apikey", "metered", "unknown", "Edited meanwhile"),
        actor="ana",
    )
    before = catalog_rows()

    response = api(
        "put",
        f"/api/v1/catalog/{entry.pk}",
        operator,
        {**OPENAI, "reason": "My stale edit", "version": 1},
    )

    assert response.status_code == 409
    assert response.json() == {
        "detail": "This entry was changed by ana since you loaded it (version 2, yours 1); "
        "reload and retry."
    }
    assert catalog_rows() == before
    assert not AuditEntry.objects.filter(actor="token:ops").exists()


def test_put_catalog_entry_onto_another_entrys_key_is_409(operator: str) -> None:
    entry = make_entry()
    before = catalog_rows()

    response = api(
        "put",
        f"/api/v1/catalog/{entry.pk}",
        operator,
        {**OPENAI, "provider": "claude", "auth_type": "oauth"},
    )

    assert response.status_code == 409
    assert response.json() == {
        "detail": "An entry for provider 'claude' with auth type 'oauth' exists already."
    }
    assert catalog_rows() == before


def test_put_unknown_catalog_entry_is_404(operator: str) -> None:
    response = api("put", "/api/v1/catalog/999999", operator, OPENAI)

    assert response.status_code == 404
    assert response.json() == {"detail": "No catalog entry 999999."}
    assert not BillingCatalogEntry.objects.filter(provider="openai").exists()


def test_put_catalog_entry_refuses_a_string_version(operator: str) -> None:
    entry = make_entry()
    before = catalog_rows()

    response = api("put", f"/api/v1/catalog/{entry.pk}", operator, {**OPENAI, "version": "1"})

    assert response.status_code == 422
    assert [(e["loc"], e["type"]) for e in response.json()["detail"]] == [
        (["body", "payload", "version"], "int_type")
    ]
    assert catalog_rows() == before


def test_delete_catalog_entry_answers_204_and_audits(operator: str) -> None:
    entry = make_entry()

    response = api("delete", f"/api/v1/catalog/{entry.pk}", operator)

    assert response.status_code == 204
    assert response.content == b""
    assert not BillingCatalogEntry.objects.filter(pk=entry.pk).exists()
    audit = AuditEntry.objects.get(actor="token:ops")
    assert (audit.target_type, audit.target_id, audit.action, audit.before, audit.after) == (
        "catalog",
        str(entry.pk),
        "delete",
        OPENAI,
        None,
    )


def test_delete_unknown_catalog_entry_is_404(operator: str) -> None:
    response = api("delete", "/api/v1/catalog/999999", operator)

    assert response.status_code == 404
    assert response.json() == {"detail": "No catalog entry 999999."}


# --- prices ------------------------------------------------------------------------------


def test_list_prices_returns_each_price_with_its_tier(gateway: str) -> None:
    mini = make_price("openai", "gpt-4o-mini", input_usd="0.15", output_usd="0.6")
    big = make_price("openai", "gpt-4o", input_usd="2.5", output_usd="10")
    free = make_price("google", "gemma", input_usd="0", output_usd="0")
    star = make_price("groq", "*", input_usd="0.5", output_usd="0.5", tier_override="free")

    response = api("get", "/api/v1/prices", gateway)

    assert response.status_code == 200
    assert response.json() == [
        {
            "id": free.pk,
            "provider": "google",
            "model": "gemma",
            "input_usd_per_mtok": 0.0,
            "output_usd_per_mtok": 0.0,
            "tier_override": None,
            "source": "manual",
            "needs_review": False,
            "tier": "free",
        },
        {
            "id": star.pk,
            "provider": "groq",
            "model": "*",
            "input_usd_per_mtok": 0.5,
            "output_usd_per_mtok": 0.5,
            "tier_override": "free",
            "source": "manual",
            "needs_review": False,
            "tier": "free",
        },
        {
            "id": big.pk,
            "provider": "openai",
            "model": "gpt-4o",
            "input_usd_per_mtok": 2.5,
            "output_usd_per_mtok": 10.0,
            "tier_override": None,
            "source": "manual",
            "needs_review": False,
            "tier": "premium",
        },
        {
            "id": mini.pk,
            "provider": "openai",
            "model": "gpt-4o-mini",
            "input_usd_per_mtok": 0.15,
            "output_usd_per_mtok": 0.6,
            "tier_override": None,
            "source": "manual",
            "needs_review": False,
            "tier": "cheap",
        },
    ]


def test_post_price_creates_it_with_201(operator: str) -> None:
    body = {
        "provider": "openai",
        "model": "gpt-4o-mini",
        "input_usd_per_mtok": 0.15,
        "output_usd_per_mtok": 0.6,
        "tier_override": None,
    }

    response = api("post", "/api/v1/prices", operator, body)

    price = ModelPrice.objects.get()
    assert response.status_code == 201
    assert response.json() == {
        "id": price.pk,
        **body,
        "source": "manual",
        "needs_review": False,
        "tier": "cheap",
    }
    assert (str(price.input_usd_per_mtok), str(price.output_usd_per_mtok), price.updated_by) == (
        "0.150000",
        "0.600000",
        "token:ops",
    )


def test_post_price_again_updates_it_with_200(operator: str) -> None:
    price = make_price("openai", "gpt-4o-mini")

    response = api(
        "post",
        "/api/v1/prices",
        operator,
        {
            "provider": "openai",
            "model": "gpt-4o-mini",
            "input_usd_per_mtok": 3,
            "output_usd_per_mtok": 12,
            "tier_override": "cheap",
        },
    )

    assert response.status_code == 200
    assert response.json() == {
        "id": price.pk,
        "provider": "openai",
        "model": "gpt-4o-mini",
        "input_usd_per_mtok": 3.0,
        "output_usd_per_mtok": 12.0,
        "tier_override": "cheap",
        "source": "manual",
        "needs_review": False,
        "tier": "cheap",
    }
    assert ModelPrice.objects.count() == 1


def test_post_price_audits_create_and_update_with_the_token_name(operator: str) -> None:
    body = {"provider": "openai", "model": "o3", "input_usd_per_mtok": 2, "output_usd_per_mtok": 8}

    first = api("post", "/api/v1/prices", operator, body)
    api("post", "/api/v1/prices", operator, {**body, "input_usd_per_mtok": 1})

    audits = list(AuditEntry.objects.filter(target_type="price").order_by("pk"))
    snapshot = {
        "provider": "openai",
        "model": "o3",
        "tier_override": None,
        "source": "manual",
        "needs_review": False,
    }
    assert [(a.target_id, a.action, a.actor, a.before, a.after) for a in audits] == [
        (
            str(first.json()["id"]),
            "create",
            "token:ops",
            None,
            {**snapshot, "input_usd_per_mtok": "2.000000", "output_usd_per_mtok": "8.000000"},
        ),
        (
            str(first.json()["id"]),
            "update",
            "token:ops",
            {**snapshot, "input_usd_per_mtok": "2.000000", "output_usd_per_mtok": "8.000000"},
            {**snapshot, "input_usd_per_mtok": "1.000000", "output_usd_per_mtok": "8.000000"},
        ),
    ]


@pytest.mark.parametrize(
    ("field", "value", "error_type"),
    [
        pytest.param("input_usd_per_mtok", -1, "greater_than_equal", id="negative"),
        pytest.param("input_usd_per_mtok", True, "float_type", id="boolean"),
        pytest.param("input_usd_per_mtok", "0.15", "float_type", id="numeric-string"),
        pytest.param("output_usd_per_mtok", 100_000_000, "less_than_equal", id="too-large"),
        # Passes "< 100,000,000" but rounds to 100000000.000000 at 6 decimals: it used
        # to overflow the column and answer 500.
        pytest.param("output_usd_per_mtok", 99_999_999.9999999, "less_than_equal", id="rounds-up"),
        pytest.param("tier_override", "cheapest", "literal_error", id="unknown-tier"),
        pytest.param("model", "", "string_too_short", id="empty-model"),
        pytest.param("provider", "open\x00ai", "string_pattern_mismatch", id="nul-byte"),
    ],
)
def test_post_price_refuses_an_invalid_value_and_stores_nothing(
    operator: str, field: str, value: Any, error_type: str
) -> None:
    body = {
        "provider": "openai",
        "model": "gpt-4o-mini",
        "input_usd_per_mtok": 0.15,
        "output_usd_per_mtok": 0.6,
        field: value,
    }

    response = api("post", "/api/v1/prices", operator, body)

    assert response.status_code == 422
    assert [(e["loc"], e["type"]) for e in response.json()["detail"]] == [
        (["body", "payload", field], error_type)
    ]
    assert price_rows() == []
    assert not AuditEntry.objects.exists()


def test_post_price_at_the_largest_storable_value_is_accepted(operator: str) -> None:
    body = {
        "provider": "openai",
        "model": "gpt-4o-mini",
        "input_usd_per_mtok": 99_999_999.999999,
        "output_usd_per_mtok": 0,
    }

    response = api("post", "/api/v1/prices", operator, body)

    assert response.status_code == 201
    assert str(ModelPrice.objects.get().input_usd_per_mtok) == "99999999.999999"
    assert api("get", "/api/v1/prices", operator).status_code == 200


def test_post_price_refuses_unknown_fields(operator: str) -> None:
    body = {
        "provider": "openai",
        "model": "gpt-4o-mini",
        "input_usd_per_mtok": 0.15,
        "output_usd_per_mtok": 0.6,
        "currency": "EUR",
    }

    response = api("post", "/api/v1/prices", operator, body)

    assert response.status_code == 422
    assert [(e["loc"], e["type"]) for e in response.json()["detail"]] == [
        (["body", "payload", "currency"], "extra_forbidden")
    ]
    assert price_rows() == []


def test_delete_price_answers_204_and_audits(operator: str) -> None:
    price = make_price()

    response = api("delete", f"/api/v1/prices/{price.pk}", operator)

    assert response.status_code == 204
    assert not ModelPrice.objects.exists()
    audit = AuditEntry.objects.get(actor="token:ops")
    assert (audit.target_type, audit.target_id, audit.action, audit.after) == (
        "price",
        str(price.pk),
        "delete",
        None,
    )


def test_delete_unknown_price_is_404(operator: str) -> None:
    response = api("delete", "/api/v1/prices/999999", operator)

    assert response.status_code == 404
    assert response.json() == {"detail": "No price 999999."}


# --- every price written fits its column ----------------------------------------------------


@pytest.mark.parametrize(
    "value",
    [
        Decimal("99999999.9999999"),  # below 1e8, but 100,000,000.000000 once rounded
        Decimal("1e9"),
        Decimal("1e999999"),
        Decimal("-0.000001"),
        Decimal("NaN"),
        Decimal("sNaN"),
    ],
    ids=["rounds-past-the-column", "1e9", "1e999999", "negative", "nan", "signalling-nan"],
)
def test_the_price_service_refuses_a_value_beyond_its_column_and_changes_nothing(
    value: Decimal,
) -> None:
    make_price()
    before = price_rows()

    with pytest.raises(ValidationError) as refused:
        services.upsert_price(
            services.PriceInput("openai", "gpt-4o-mini", value, Decimal(1), None), actor="x"
        )

    assert list(refused.value.message_dict) == ["input_usd_per_mtok"]
    assert price_rows() == before
    assert [p.model for p in ModelPrice.objects.all()] == ["gpt-4o-mini"]  # still readable


def test_the_largest_price_the_column_holds_is_stored_exactly() -> None:
    price = make_price(input_usd="99999999.999999")

    price.refresh_from_db()
    assert price.input_usd_per_mtok == Decimal("99999999.999999")
