"""The Django admin is no back door around the services. Every registered ModelAdmin is
listed in COVERAGE with how its writes are held: through the services (audited, the
config counter moves), read-only (refused, nothing changes), or accounts (users: not a
decision input, recorded in Django's admin log, no counter). Every write the admin
offers (add, change, save as new, delete, and every action of every ModelAdmin) is tried
through the real admin views as a superuser. A newly registered admin, a new action, an
inline or a list_editable without an entry here fails the suite."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pytest
from django.contrib import admin
from django.contrib.admin.models import LogEntry
from django.contrib.auth.models import Group, User
from django.db.models import Model
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from billing import services
from billing.models import AuditEntry, BillingCatalogEntry, ModelPrice
from ladder.models import ApiToken
from omniroute_admin.admin_guards import GuardedModelAdmin
from tests.billing.factories import make_catalog_entry, make_price
from tests.ladder.factories import api, make_candidate, make_connection, make_reading, make_token

pytestmark = pytest.mark.django_db

SUPERUSER = "root"
SERVICES = "services"
READ_ONLY = "read-only"
ACCOUNTS = "accounts"


def _catalog(provider: str = "acme") -> BillingCatalogEntry:
    return make_catalog_entry(provider)


def _price(model: str = "gpt-4o") -> ModelPrice:
    return make_price("openai", model, input_usd="2.5", output_usd="10", tier_override="free")


def _audit(target_id: str = "1") -> AuditEntry:
    entry = services.record_audit(
        target_type="catalog",
        target_id=target_id,
        action="create",
        actor="setup",
        before=None,
        after={"provider": "acme"},
    )
    assert entry is not None
    return entry


def _group(name: str = "operator") -> Group:
    return Group.objects.get_or_create(name=name)[0]


def _user(name: str = "vera") -> User:
    return User.objects.create_user(name, password="a-long-test-password")


def _user_change(user: Model) -> dict[str, Any]:
    assert isinstance(user, User)
    return {
        "username": user.username,
        "first_name": "Vera",
        "last_name": "",
        "email": "vera@example.com",
        "is_active": "on",
        "groups": [str(_group("operator").pk)],
        "date_joined_0": "2026-01-01",
        "date_joined_1": "00:00:00",
        "last_login_0": "",
        "last_login_1": "",
    }


@dataclass(frozen=True)
class Coverage:
    """How one registered admin holds its writes, and the data to try them with."""

    kind: str
    make: Callable[[int], Model]  # the n-th sample row, through the services
    add: dict[str, Any]
    change: Callable[[Model], dict[str, Any]]
    target_type: str | None = None  # the audit rows' target_type (SERVICES only)
    # Every action the admin offers, with the audited action of each row it writes.
    actions: dict[str, str] = field(default_factory=lambda: {"delete_selected": "delete"})


COVERAGE: dict[type[Model], Coverage] = {
    BillingCatalogEntry: Coverage(
        kind=SERVICES,
        make=lambda n: _catalog(f"acme-{n}"),
        add={
            "provider": "gemini",
            "auth_type": "oauth",
            "billing": "subscription",
            "overage": "hard-stop",
            "reason": "Plan terms.",
        },
        change=lambda entry: {
            "provider": entry.provider,  # type: ignore[attr-defined]
            "auth_type": "oauth",
            "billing": "metered",
            "overage": "meters-to-paid",
            "reason": "Pay as you go.",
        },
        target_type="catalog",
    ),
    ModelPrice: Coverage(
        kind=SERVICES,
        make=lambda n: _price(f"gpt-4o-{n}"),
        add={
            "provider": "anthropic",
            "model": "claude-3-haiku",
            "input_usd_per_mtok": "0.25",
            "output_usd_per_mtok": "1.25",
            "tier_override": "",
        },
        change=lambda price: {
            "input_usd_per_mtok": "3",
            "output_usd_per_mtok": "12",
            "tier_override": "",
        },
        target_type="price",
    ),
    AuditEntry: Coverage(
        kind=READ_ONLY,
        make=lambda n: _audit(str(n)),
        add={
            "target_type": "catalog",
            "target_id": "9",
            "action": "delete",
            "actor": "forger",
            "at_0": "2026-01-01",
            "at_1": "00:00:00",
            "before": "null",
            "after": "null",
        },
        change=lambda entry: {"actor": "forger", "action": "delete", "target_type": "catalog"},
    ),
    Group: Coverage(
        kind=READ_ONLY,
        make=lambda n: _group(("operator", "viewer")[n % 2]),
        add={"name": "auditors"},
        change=lambda group: {"name": "renamed"},
    ),
    User: Coverage(
        kind=ACCOUNTS,
        make=lambda n: _user(f"vera-{n}"),
        add={
            "username": "newbie",
            "usable_password": "true",
            "password1": "a-long-test-password-1",
            "password2": "a-long-test-password-1",
        },
        change=_user_change,
    ),
}

REGISTERED = list(admin.site._registry.items())
MODEL_IDS = [model._meta.label for model, _ in REGISTERED]


def action_names(model_admin: Any) -> set[str]:
    """Every action the admin offers anyone, before the per-request permission filter."""
    return {name for _, name, _ in model_admin._get_base_actions()}


ACTIONS = [
    (model, name)
    for model, model_admin in REGISTERED
    for name in sorted({"delete_selected", *action_names(model_admin)})
]
ACTION_IDS = [f"{model._meta.label}-{name}" for model, name in ACTIONS]


@pytest.fixture
def root(client: Client) -> Client:
    client.force_login(User.objects.create_superuser(SUPERUSER, password="a-long-password"))
    return client


def coverage_of(model: type[Model]) -> Coverage:
    assert model in COVERAGE, (
        f"{model._meta.label} is registered in the admin without an entry in COVERAGE: "
        "route its writes through the services, or make it read-only, and say so here."
    )
    return COVERAGE[model]


def url(model: type[Model], view: str, *args: Any) -> str:
    return reverse(f"admin:{model._meta.app_label}_{model._meta.model_name}_{view}", args=args)


def rows(model: type[Model]) -> list[dict[str, Any]]:
    return list(model._default_manager.order_by("pk").values())


@dataclass(frozen=True)
class World:
    counters: tuple[int, int]
    audit: list[dict[str, Any]]
    log_entries: int
    rows: list[dict[str, Any]]


def world(model: type[Model]) -> World:
    audit: list[dict[str, Any]] = [
        dict(row)
        for row in AuditEntry.objects.order_by("pk").values("target_type", "action", "actor")
    ]
    return World(services.change_counters(), audit, LogEntry.objects.count(), rows(model))


def assert_held(
    model: type[Model],
    before: World,
    response: Any,
    action: str,
    *,
    writes: int = 1,
    refused: tuple[int, ...] = (403,),
) -> None:
    """The write went through the services (SERVICES), or was refused and changed
    nothing (READ_ONLY), or was logged without moving a counter (ACCOUNTS)."""
    after = world(model)
    coverage = coverage_of(model)
    if coverage.kind == READ_ONLY:
        assert response.status_code in refused
        assert after == before
        return
    assert response.status_code == 302, response.content.decode()[:2000]
    assert after.rows != before.rows
    if coverage.kind == SERVICES:
        config, state = before.counters
        assert after.counters == (config + writes, state)
        new_audit = after.audit[len(before.audit) :]
        assert (
            new_audit
            == [{"target_type": coverage.target_type, "action": action, "actor": SUPERUSER}]
            * writes
        )
    else:
        assert coverage.kind == ACCOUNTS
        assert after.counters == before.counters
        assert after.audit == before.audit
        assert after.log_entries == before.log_entries + writes


# --- coverage ------------------------------------------------------------------------------


def test_every_registered_admin_is_covered() -> None:
    assert {model._meta.label for model in admin.site._registry} == {
        model._meta.label for model in COVERAGE
    }


@pytest.mark.parametrize(("model", "model_admin"), REGISTERED, ids=MODEL_IDS)
def test_every_action_of_every_admin_is_covered(model: type[Model], model_admin: Any) -> None:
    assert action_names(model_admin) <= set(coverage_of(model).actions)
    # Other ways the admin writes: rows edited in the list, inline formsets.
    assert not model_admin.list_editable
    assert not model_admin.inlines
    # Hostile list queries are refused before the database (a NUL is a 500 on PostgreSQL).
    assert isinstance(model_admin, GuardedModelAdmin)


# --- every write of every admin ------------------------------------------------------------


@pytest.mark.parametrize("model", [model for model, _ in REGISTERED], ids=MODEL_IDS)
def test_admin_add_goes_through_the_services_or_is_refused(root: Client, model: Any) -> None:
    coverage = coverage_of(model)
    before = world(model)

    response = root.post(url(model, "add"), coverage.add)

    assert_held(model, before, response, "create")


@pytest.mark.parametrize("model", [model for model, _ in REGISTERED], ids=MODEL_IDS)
def test_admin_change_goes_through_the_services_or_is_refused(root: Client, model: Any) -> None:
    coverage = coverage_of(model)
    obj = coverage.make(0)
    before = world(model)

    response = root.post(url(model, "change", obj.pk), coverage.change(obj))

    assert_held(model, before, response, "update")


@pytest.mark.parametrize("model", [model for model, _ in REGISTERED], ids=MODEL_IDS)
def test_admin_save_as_new_goes_through_the_services_or_is_refused(
    root: Client, model: Any
) -> None:
    # "_saveasnew" on a change page is an add, whatever the admin's save_as says.
    coverage = coverage_of(model)
    obj = coverage.make(0)
    before = world(model)

    response = root.post(url(model, "change", obj.pk), {**coverage.add, "_saveasnew": "1"})

    assert_held(model, before, response, "create")


@pytest.mark.parametrize("model", [model for model, _ in REGISTERED], ids=MODEL_IDS)
def test_admin_delete_goes_through_the_services_or_is_refused(root: Client, model: Any) -> None:
    obj = coverage_of(model).make(0)
    before = world(model)

    response = root.post(url(model, "delete", obj.pk), {"post": "yes"})

    assert_held(model, before, response, "delete")


@pytest.mark.parametrize(("model", "action"), ACTIONS, ids=ACTION_IDS)
def test_every_admin_action_goes_through_the_services_or_is_refused(
    root: Client, model: Any, action: str
) -> None:
    coverage = coverage_of(model)
    assert action in coverage.actions, f"no coverage for the {action!r} action of {model}"
    selected = [str(coverage.make(n).pk) for n in range(2)]
    before = world(model)

    # As the admin's pages do it: "Go" on the list (index=0), then the confirmation.
    chosen = {"action": action, "_selected_action": selected}
    root.post(url(model, "changelist"), {**chosen, "index": "0"})
    response = root.post(url(model, "changelist"), {**chosen, "post": "yes"})

    # A read-only admin offers no action: the list comes back, or a redirect to it.
    assert_held(
        model,
        before,
        response,
        coverage.actions[action],
        writes=len(selected),
        refused=(200, 302),
    )


# --- what the back door did ----------------------------------------------------------------


def test_a_bulk_admin_delete_of_a_subscription_entry_reaches_a_warm_pool(root: Client) -> None:
    entry = _catalog("acme")
    make_connection("acme-plan", provider="acme", auth_type="oauth")
    now = timezone.now()
    make_reading("acme-plan", now=now, checked_at=now, remaining_percent=50.0)
    make_candidate("acme", "acme-large", connection_id="acme-plan")
    gateway = make_token("gw", ApiToken.Scope.GATEWAY)
    warm = api("get", "/api/v1/pools/auto/subscription", gateway).json()
    assert [c["connection_id"] for c in warm["candidates"]] == ["acme-plan"]

    root.post(
        url(BillingCatalogEntry, "changelist"),
        {"action": "delete_selected", "_selected_action": [str(entry.pk)], "post": "yes"},
    )

    after = api("get", "/api/v1/pools/auto/subscription", gateway).json()
    assert after["candidates"] == []
    assert [(e["connection_id"], e["reason"]) for e in after["excluded"]] == [
        ("acme-plan", "uncurated")
    ]
    assert list(
        AuditEntry.objects.filter(target_type="catalog", action="delete").values_list(
            "target_id", "actor"
        )
    ) == [(str(entry.pk), SUPERUSER)]


# --- hostile input on every add and change form: a form error, never a 500 ----------------

LONG = "a" * 300
CATALOG_ADD = COVERAGE[BillingCatalogEntry].add
PRICE_ADD = COVERAGE[ModelPrice].add
HOSTILE_CATALOG = [
    pytest.param({"auth_type": "none"}, "auth_type", id="auth-type-none"),
    pytest.param({"auth_type": "  none "}, "auth_type", id="auth-type-none-padded"),
    pytest.param({"provider": ""}, "provider", id="provider-empty"),
    pytest.param({"provider": "   "}, "provider", id="provider-blank"),
    pytest.param({"provider": "ac\x00me"}, "provider", id="provider-nul"),
    pytest.param({"provider": "a" * 65}, "provider", id="provider-65-chars"),
    pytest.param({"auth_type": "o\x00auth"}, "auth_type", id="auth-type-nul"),
    pytest.param({"auth_type": LONG}, "auth_type", id="auth-type-over-long"),
    pytest.param({"reason": ""}, "reason", id="reason-empty"),
    pytest.param({"reason": "a" * 1001}, "reason", id="reason-over-long"),
    pytest.param({"reason": "why\x00"}, "reason", id="reason-nul"),
    pytest.param({"billing": "free-forever"}, "billing", id="billing-unknown"),
    pytest.param({"overage": ""}, "overage", id="overage-empty"),
    pytest.param({"provider": "taken", "auth_type": "oauth"}, None, id="duplicate"),
    pytest.param({"provider": "taken-wide", "auth_type": ""}, None, id="duplicate-provider-wide"),
]
HOSTILE_PRICE = [
    pytest.param({"provider": ""}, "provider", id="provider-empty"),
    pytest.param({"provider": "open\x00ai"}, "provider", id="provider-nul"),
    pytest.param({"provider": "a" * 65}, "provider", id="provider-65-chars"),
    pytest.param({"model": ""}, "model", id="model-empty"),
    pytest.param({"model": "gpt\x00"}, "model", id="model-nul"),
    pytest.param({"model": "m" * 201}, "model", id="model-201-chars"),
    pytest.param({"provider": "openai", "model": "taken"}, None, id="duplicate"),
    pytest.param({"tier_override": "gratis"}, "tier_override", id="tier-unknown"),
]
HOSTILE_COSTS = [
    pytest.param("-1", id="negative"),
    pytest.param("1e999999", id="1e999999"),
    pytest.param("1e-999999", id="1e-999999"),
    pytest.param("NaN", id="nan"),
    pytest.param("Infinity", id="infinity"),
    pytest.param("100000000", id="1e8"),
    pytest.param("1000000000000", id="1e12"),
    pytest.param("0.0000001", id="7-decimals"),
    pytest.param("", id="empty"),
    pytest.param("1\x00", id="nul"),
    pytest.param("twelve", id="text"),
]


def assert_form_error(response: Any, field_name: str | None) -> None:
    """The form came back (200) with an error on that field (None: a form-wide one)."""
    assert response.status_code == 200
    errors = response.context["adminform"].form.errors
    assert errors
    if field_name is not None:
        assert field_name in errors, errors
    else:
        assert "__all__" in errors, errors


def _taken() -> None:
    services.create_catalog_entry(
        services.CatalogInput("taken", "oauth", "metered", "meters-to-paid", "Keys."),
        actor="setup",
    )
    services.create_catalog_entry(
        services.CatalogInput("taken-wide", None, "metered", "meters-to-paid", "Keys."),
        actor="setup",
    )


@pytest.mark.parametrize(("hostile", "field_name"), HOSTILE_CATALOG)
def test_admin_add_catalog_entry_refuses_hostile_input_with_a_form_error(
    root: Client, hostile: dict[str, str], field_name: str | None
) -> None:
    _taken()
    before = world(BillingCatalogEntry)

    response = root.post(url(BillingCatalogEntry, "add"), {**CATALOG_ADD, **hostile})

    assert_form_error(response, field_name)
    assert world(BillingCatalogEntry) == before


@pytest.mark.parametrize(("hostile", "field_name"), HOSTILE_CATALOG)
def test_admin_change_catalog_entry_refuses_hostile_input_with_a_form_error(
    root: Client, hostile: dict[str, str], field_name: str | None
) -> None:
    _taken()
    entry = _catalog("acme")
    before = world(BillingCatalogEntry)

    response = root.post(
        url(BillingCatalogEntry, "change", entry.pk),
        {**COVERAGE[BillingCatalogEntry].change(entry), **hostile},
    )

    assert_form_error(response, field_name)
    assert world(BillingCatalogEntry) == before


@pytest.mark.parametrize(("hostile", "field_name"), HOSTILE_PRICE)
def test_admin_add_price_refuses_hostile_input_with_a_form_error(
    root: Client, hostile: dict[str, str], field_name: str | None
) -> None:
    _price("taken")
    before = world(ModelPrice)

    response = root.post(url(ModelPrice, "add"), {**PRICE_ADD, **hostile})

    assert_form_error(response, field_name)
    assert world(ModelPrice) == before


@pytest.mark.parametrize("cost", HOSTILE_COSTS)
@pytest.mark.parametrize("field_name", ["input_usd_per_mtok", "output_usd_per_mtok"])
def test_admin_add_and_change_price_refuse_a_hostile_cost_with_a_form_error(
    root: Client, cost: str, field_name: str
) -> None:
    price = _price("gpt-4o")
    before = world(ModelPrice)

    added = root.post(url(ModelPrice, "add"), {**PRICE_ADD, field_name: cost})
    changed = root.post(
        url(ModelPrice, "change", price.pk),
        {**COVERAGE[ModelPrice].change(price), field_name: cost},
    )

    assert_form_error(added, field_name)
    assert_form_error(changed, field_name)
    assert world(ModelPrice) == before


def test_admin_change_price_cannot_rename_a_row_into_another(root: Client) -> None:
    # Renaming would upsert a second row and leave this one: provider and model are
    # read-only on a change page, so a posted rename is ignored.
    price = _price("gpt-4o")

    response = root.post(
        url(ModelPrice, "change", price.pk),
        {**COVERAGE[ModelPrice].change(price), "provider": "other", "model": "other"},
    )

    assert response.status_code == 302
    assert list(ModelPrice.objects.values_list("pk", "provider", "model")) == [
        (price.pk, "openai", "gpt-4o")
    ]


@pytest.mark.parametrize(
    ("hostile", "field_name"),
    [
        pytest.param({"username": ""}, "username", id="empty"),
        pytest.param({"username": "ve\x00ra"}, "username", id="nul"),
        pytest.param({"username": "v" * 151}, "username", id="151-chars"),
        pytest.param({"username": SUPERUSER}, "username", id="duplicate"),
        pytest.param({"password2": "something-else-entirely"}, "password2", id="mismatch"),
    ],
)
def test_admin_add_user_refuses_hostile_input_with_a_form_error(
    root: Client, hostile: dict[str, str], field_name: str
) -> None:
    before = world(User)

    response = root.post(url(User, "add"), {**COVERAGE[User].add, **hostile})

    assert_form_error(response, field_name)
    assert world(User) == before


def _text_field(model: type[Model]) -> str:
    return next(f.name for f in model._meta.get_fields() if f.get_internal_type() == "CharField")


@pytest.mark.parametrize(
    "query",
    [
        "?q=%00",
        "?q=" + "a" * 5000,
        "?{text}=%00",
        "?{text}__exact=%00",
        "?{text}__startswith=a%00",
        "?%00=1",
        "?o=%00",
        "?p=-1",
        "?p=99999999999999999999",
        "?billing=%00",
    ],
)
@pytest.mark.parametrize("model", [model for model, _ in REGISTERED], ids=MODEL_IDS)
def test_admin_lists_never_answer_500_to_a_hostile_query(
    root: Client, model: Any, query: str
) -> None:
    coverage_of(model).make(0)

    response = root.get(url(model, "changelist") + query.format(text=_text_field(model)))

    assert response.status_code in (200, 302)


@pytest.mark.parametrize("object_id", ["%00", "a" * 300, "-1", "1e9", "99999999999999999999"])
@pytest.mark.parametrize("model", [model for model, _ in REGISTERED], ids=MODEL_IDS)
def test_admin_object_pages_never_answer_500_to_a_hostile_id(
    root: Client, model: Any, object_id: str
) -> None:
    base = url(model, "changelist")

    for page in ("change/", "delete/", "history/"):
        response = root.get(f"{base}{object_id}/{page}")
        assert response.status_code in (302, 403, 404), (page, response.status_code)


@pytest.mark.parametrize(
    ("hostile", "field_name"),
    [
        pytest.param({"username": ""}, "username", id="username-empty"),
        pytest.param({"username": "ve\x00ra"}, "username", id="username-nul"),
        pytest.param({"username": "v" * 151}, "username", id="username-151-chars"),
        pytest.param({"username": SUPERUSER}, "username", id="username-duplicate"),
        pytest.param({"email": "not-an-address"}, "email", id="email-invalid"),
        pytest.param({"email": "a\x00@example.com"}, "email", id="email-nul"),
        pytest.param({"first_name": "V" * 151}, "first_name", id="first-name-over-long"),
        pytest.param({"groups": ["999999"]}, "groups", id="unknown-group"),
        pytest.param({"date_joined_0": "\x00"}, "date_joined", id="date-nul"),
        pytest.param({"date_joined_0": "9999-99-99"}, "date_joined", id="date-impossible"),
    ],
)
def test_admin_change_user_refuses_hostile_input_with_a_form_error(
    root: Client, hostile: dict[str, Any], field_name: str
) -> None:
    user = _user("vera")
    before = world(User)

    response = root.post(url(User, "change", user.pk), {**_user_change(user), **hostile})

    assert_form_error(response, field_name)
    assert world(User) == before


def test_a_conflict_the_service_finds_at_save_time_is_a_message_not_a_500(
    root: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A concurrent write took the name between the form's check and the save.
    def lost_the_race(*args: Any, **kwargs: Any) -> Any:
        raise services.Conflict("An entry for provider 'gemini' exists already.")

    monkeypatch.setattr(services, "create_catalog_entry", lost_the_race)
    before = world(BillingCatalogEntry)

    response = root.post(url(BillingCatalogEntry, "add"), CATALOG_ADD, follow=True)

    assert response.status_code == 200
    assert [str(m) for m in response.context["messages"]] == [
        "Nothing was saved: An entry for provider 'gemini' exists already."
    ]
    assert world(BillingCatalogEntry) == before


def test_a_row_deleted_meanwhile_is_a_message_not_a_500(
    root: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    entry = _catalog("acme")

    def gone(*args: Any, **kwargs: Any) -> None:
        raise BillingCatalogEntry.DoesNotExist

    monkeypatch.setattr(services, "delete_catalog_entry", gone)
    before = world(BillingCatalogEntry)

    response = root.post(url(BillingCatalogEntry, "delete", entry.pk), {"post": "yes"}, follow=True)

    assert response.status_code == 200
    assert [str(m) for m in response.context["messages"]] == [
        "Nothing was saved: It was deleted meanwhile."
    ]
    assert world(BillingCatalogEntry) == before


def test_admin_adds_are_stored_with_normalised_provider_ids(root: Client) -> None:
    root.post(url(ModelPrice, "add"), {**PRICE_ADD, "provider": " Anthropic ", "model": "m-x"})
    root.post(
        url(BillingCatalogEntry, "add"),
        {**CATALOG_ADD, "provider": "GitHub_Copilot", "auth_type": "OAuth"},
    )
    assert ModelPrice.objects.filter(provider="claude", model="m-x").exists()
    assert BillingCatalogEntry.objects.filter(provider="copilot", auth_type="oauth").exists()
