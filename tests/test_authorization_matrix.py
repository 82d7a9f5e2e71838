"""One authorization matrix over the whole URLconf: every URL and method, for anonymous,
viewer, operator, a gateway token and an operator token. A URL the matrix does not list
fails the test, so a new route cannot ship without deciding who may use it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest
from django.contrib.auth.models import Group, User
from django.test import Client
from django.urls import URLPattern, URLResolver, get_resolver
from django.utils import timezone

from billing.models import BillingCatalogEntry, ModelPrice
from ladder.models import ApiToken, Candidate, SimulationRun
from omniroute_admin.api import api
from tests.ladder.factories import make_candidate, make_connection, make_token, make_webhook

ROLES = ("anonymous", "viewer", "operator", "gateway_token", "operator_token")

# Outcomes.
LOGIN = "login"  # 302 to the dashboard's sign-in page
ADMIN_LOGIN = "admin-login"  # 302 to the Django admin's sign-in page
UNAUTHORIZED = "401"
FORBIDDEN = "403"
ALLOWED = "allowed"  # served: any status below 500 other than the refusals above

PAGE = {
    "anonymous": LOGIN,
    "viewer": ALLOWED,
    "operator": ALLOWED,
    "gateway_token": LOGIN,  # the dashboard ignores API tokens
    "operator_token": LOGIN,
}
DASHBOARD_WRITE = {**PAGE, "viewer": FORBIDDEN}
API_READ = {  # gateway scope; sessions never authenticate the API (header tokens only)
    "anonymous": UNAUTHORIZED,
    "viewer": UNAUTHORIZED,
    "operator": UNAUTHORIZED,
    "gateway_token": ALLOWED,
    "operator_token": ALLOWED,
}
API_OPERATOR = {**API_READ, "gateway_token": FORBIDDEN}
PUBLIC = dict.fromkeys(ROLES, ALLOWED)
ADMIN = dict.fromkeys(ROLES, ADMIN_LOGIN)  # dashboard roles are not staff

# Django routes (API routes come from the OpenAPI document below).
DASHBOARD: dict[tuple[str, str], dict[str, str]] = {
    ("GET", ""): PAGE,
    ("GET", "connections/"): PAGE,
    ("GET", "connections/<connection_id:connection_id>/"): PAGE,
    ("GET", "connections/add/"): PAGE,
    ("POST", "connections/add/"): DASHBOARD_WRITE,
    ("POST", "connections/<connection_id:connection_id>/refresh/"): DASHBOARD_WRITE,
    ("POST", "connections/<connection_id:connection_id>/edit/"): DASHBOARD_WRITE,
    ("POST", "connections/<connection_id:connection_id>/delete/"): DASHBOARD_WRITE,
    ("GET", "candidates/"): PAGE,
    ("GET", "candidates/<int:candidate_id>/"): PAGE,
    ("POST", "candidates/add/"): DASHBOARD_WRITE,
    ("POST", "candidates/<int:candidate_id>/edit/"): DASHBOARD_WRITE,
    # The last write of the matrix on its candidate: a delete (the world is fresh per case).
    ("POST", "candidates/<int:candidate_id>/delete/"): DASHBOARD_WRITE,
    ("GET", "pools/"): PAGE,
    ("GET", "pools/timeline/"): PAGE,
    ("GET", "spend/"): PAGE,
    ("GET", "spend/export.csv"): PAGE,
    ("GET", "reports/simulation/"): PAGE,
    ("POST", "reports/simulation/run/"): DASHBOARD_WRITE,
    ("GET", "reports/simulation/runs/<int:run_id>/"): PAGE,
    ("POST", "reports/ledger-replays/run/"): DASHBOARD_WRITE,
    ("GET", "reports/ledger-replays/<int:run_id>/"): PAGE,
    ("GET", "reports/ledger-replays/<int:run_id>/export.csv"): PAGE,
    ("GET", "audit/"): PAGE,
    ("GET", "settings/"): PAGE,
    ("POST", "settings/update/"): DASHBOARD_WRITE,
    ("GET", "tokens/"): PAGE,
    ("POST", "tokens/create/"): DASHBOARD_WRITE,
    ("POST", "tokens/<int:token_id>/revoke/"): DASHBOARD_WRITE,
    ("GET", "notifications/"): PAGE,
    ("POST", "notifications/webhooks/create/"): DASHBOARD_WRITE,
    ("POST", "notifications/webhooks/<int:webhook_id>/update/"): DASHBOARD_WRITE,
    ("POST", "notifications/webhooks/<int:webhook_id>/delete/"): DASHBOARD_WRITE,
    ("POST", "notifications/webhooks/<int:webhook_id>/test/"): DASHBOARD_WRITE,
    ("POST", "notifications/webhooks/<int:webhook_id>/rotate-secret/"): DASHBOARD_WRITE,
    ("GET", "catalog/"): PAGE,
    ("POST", "catalog/create/"): DASHBOARD_WRITE,
    ("POST", "catalog/<int:entry_id>/update/"): DASHBOARD_WRITE,
    ("POST", "catalog/<int:entry_id>/delete/"): DASHBOARD_WRITE,
    ("GET", "prices/"): PAGE,
    ("POST", "prices/save/"): DASHBOARD_WRITE,
    ("POST", "prices/<int:price_id>/delete/"): DASHBOARD_WRITE,
    ("POST", "prices/<int:price_id>/confirm-free/"): DASHBOARD_WRITE,
    ("POST", "prices/import/"): DASHBOARD_WRITE,
    ("GET", "aliases/"): PAGE,
    ("POST", "aliases/save/"): DASHBOARD_WRITE,
    ("POST", "aliases/<str:alias>/delete/"): DASHBOARD_WRITE,
    ("GET", "accounts/login/"): PUBLIC,
    ("POST", "accounts/login/"): PUBLIC,
    ("POST", "accounts/logout/"): dict.fromkeys(ROLES, LOGIN),  # always back to sign-in
    ("GET", "healthz"): PUBLIC,
    ("GET", "readyz"): PUBLIC,
    ("GET", "metrics"): PUBLIC,
    ("GET", "v1/models"): API_READ,
    ("GET", "admin/"): ADMIN,
}

# API operations: the operator-scope ones; every other operation is gateway scope.
API_OPERATOR_OPERATIONS = {
    ("POST", "/api/v1/catalog"),
    ("PUT", "/api/v1/catalog/{entry_id}"),
    ("DELETE", "/api/v1/catalog/{entry_id}"),
    ("POST", "/api/v1/prices"),
    ("DELETE", "/api/v1/prices/{price_id}"),
    ("PUT", "/api/v1/settings/ladder"),
    ("PUT", "/api/v1/provider-aliases/{alias}"),
    ("DELETE", "/api/v1/provider-aliases/{alias}"),
    ("POST", "/api/v1/what-if/ledger-replays"),
}
# API operations of gateway scope (read by any token): every operation is in exactly one
# of the two sets, so a new endpoint fails the matrix until its scope is decided here.
API_GATEWAY_OPERATIONS = {
    ("GET", "/api/v1/candidates"),
    ("POST", "/api/v1/candidates"),
    ("DELETE", "/api/v1/candidates/{candidate_id}"),
    ("PUT", "/api/v1/candidates/{candidate_id}"),
    ("GET", "/api/v1/changes"),
    ("GET", "/api/v1/catalog"),
    ("GET", "/api/v1/catalog/{entry_id}"),
    ("GET", "/api/v1/connections"),
    ("DELETE", "/api/v1/connections/{connection_id}"),
    ("GET", "/api/v1/connections/{connection_id}"),
    ("PUT", "/api/v1/connections/{connection_id}"),
    ("POST", "/api/v1/connections/{connection_id}/events"),
    ("POST", "/api/v1/connections/{connection_id}/readings"),
    ("POST", "/api/v1/connections/{connection_id}/refresh"),
    ("GET", "/api/v1/connections/{connection_id}/status"),
    ("POST", "/api/v1/events/batch"),
    ("GET", "/api/v1/models"),
    ("GET", "/api/v1/pools/{auto_id}"),
    ("POST", "/api/v1/pools/{auto_id}"),
    ("GET", "/api/v1/pools/{auto_id}/history"),
    ("GET", "/api/v1/prices"),
    ("GET", "/api/v1/settings/ladder"),
    ("POST", "/api/v1/spend"),
    ("POST", "/api/v1/spend/batch"),
    ("GET", "/api/v1/spend/summary"),
    ("GET", "/api/v1/spend"),
    ("GET", "/api/v1/provider-aliases"),
    ("GET", "/api/v1/forecasts"),
    ("GET", "/api/v1/forecasts/outcomes"),
    ("GET", "/api/v1/what-if/ledger-replays/{run_id}"),
}
# Routes the API mounts that are documentation, not operations.
API_DOCS = {"api/v1/openapi.json", "api/v1/docs"}


def _django_routes() -> set[str]:
    """Every route of the URLconf outside the API (the admin counts as one)."""
    routes: set[str] = set()

    def walk(patterns: list[Any], prefix: str) -> None:
        for pattern in patterns:
            route = prefix + str(pattern.pattern)
            if isinstance(pattern, URLResolver):
                if route == "admin/":
                    routes.add(route)
                elif route != "api/v1/":
                    walk(pattern.url_patterns, route)
            elif isinstance(pattern, URLPattern):
                routes.add(route)

    walk(get_resolver().url_patterns, "")
    return routes


def _api_operations() -> set[tuple[str, str]]:
    schema = api.get_openapi_schema()
    return {
        (method.upper(), path)
        for path, operations in schema["paths"].items()
        for method in operations
    }


def test_every_route_is_in_the_matrix() -> None:
    listed = {route for _, route in DASHBOARD}

    assert _django_routes() - listed == set()
    assert listed - _django_routes() == set()


def test_every_api_operation_has_a_scope() -> None:
    operations = _api_operations()

    assert API_OPERATOR_OPERATIONS.isdisjoint(API_GATEWAY_OPERATIONS)
    assert operations == API_OPERATOR_OPERATIONS | API_GATEWAY_OPERATIONS


@dataclass
class World:
    tokens: dict[str, str]
    ids: dict[str, str]


@pytest.fixture
def world(db: None) -> World:
    make_connection("plan", quota_source="claude")
    candidate = make_candidate(connection_id="plan", categories=("coding",))
    entry = BillingCatalogEntry.objects.get(provider="cursor")
    price = ModelPrice.objects.create(
        provider="openai", model="gpt-4o", input_usd_per_mtok=2, output_usd_per_mtok=8
    )
    gateway = make_token("gw", ApiToken.Scope.GATEWAY)
    operator = make_token("ops", ApiToken.Scope.OPERATOR)
    victim = ApiToken.objects.get(name="gw")
    webhook = make_webhook()
    now = timezone.now()
    run = SimulationRun.objects.create(
        requested_by="olga", created_at=now, updated_at=now, state="failed", active=None
    )
    return World(
        tokens={"gateway_token": gateway, "operator_token": operator},
        ids={
            "connection_id": "plan",
            "token_id": str(victim.pk),
            "entry_id": str(entry.pk),
            "price_id": str(price.pk),
            "candidate_id": str(candidate.pk),
            "webhook_id": str(webhook.pk),
            "run_id": str(run.pk),
            "auto_id": "auto/thrifty",
            "alias": "anthropic",
        },
    )


def _client_for(role: str, world: World) -> tuple[Client, dict[str, Any]]:
    client = Client()
    headers: dict[str, Any] = {}
    if role in ("viewer", "operator"):
        user = User.objects.create_user(f"{role}-user", password="a-long-test-password")
        user.groups.add(Group.objects.get(name=role))
        client.force_login(user)
    elif role in world.tokens:
        headers["HTTP_AUTHORIZATION"] = f"Bearer {world.tokens[role]}"
    return client, headers


def _url(route: str, ids: dict[str, str]) -> str:
    url = "/" + route
    for converter in ("str", "int", "path", "connection_id"):
        for name, value in ids.items():
            url = url.replace(f"<{converter}:{name}>", value)
    return url.replace("{auto_id}", ids["auto_id"]).replace("{", "").replace("}", "")


def _api_url(path: str, ids: dict[str, str]) -> str:
    for name, value in ids.items():
        path = path.replace("{" + name + "}", value)
    return path


def _outcome(response: Any) -> str:
    status = response.status_code
    assert status < 500, f"{status}: {response.content[:300]!r}"
    if status in (301, 302):
        location = response["Location"]
        if location.startswith("/accounts/login/"):
            return LOGIN
        if location.startswith("/admin/login/"):
            return ADMIN_LOGIN
    if status == 401:
        return UNAUTHORIZED
    if status == 403:
        return FORBIDDEN
    return ALLOWED


DASHBOARD_CASES = [
    pytest.param(method, route, role, expected[role], id=f"{method} /{route} as {role}")
    for (method, route), expected in DASHBOARD.items()
    for role in ROLES
]


@pytest.mark.parametrize(("method", "route", "role", "expected"), DASHBOARD_CASES)
def test_dashboard_and_operations_matrix(
    world: World, method: str, route: str, role: str, expected: str
) -> None:
    client, headers = _client_for(role, world)
    url = _url(route, world.ids)

    response = client.get(url, **headers) if method == "GET" else client.post(url, {}, **headers)

    assert _outcome(response) == expected


def _api_cases() -> list[Any]:
    cases: list[Any] = []
    for method, path in sorted(_api_operations()):
        expected = API_OPERATOR if (method, path) in API_OPERATOR_OPERATIONS else API_READ
        cases.extend(
            pytest.param(method, path, role, expected[role], id=f"{method} {path} as {role}")
            for role in ROLES
        )
    return cases


@pytest.mark.parametrize(("method", "path", "role", "expected"), _api_cases())
def test_api_matrix(world: World, method: str, path: str, role: str, expected: str) -> None:
    client, headers = _client_for(role, world)
    url = _api_url(path, world.ids)

    # An empty body: the scope is checked before the body is validated, so a refusal
    # never depends on it, and an allowed write answers 4xx for it without a change.
    response = client.generic(method, url, "{}", content_type="application/json", **headers)

    assert _outcome(response) == expected


DASHBOARD_WRITES = [route for (method, route) in DASHBOARD if method == "POST"]


@pytest.mark.parametrize("route", [r for r in DASHBOARD_WRITES if r != "accounts/login/"])
def test_every_dashboard_write_needs_csrf(world: World, route: str) -> None:
    client = Client(enforce_csrf_checks=True)
    user = User.objects.create_user("ops", password="a-long-test-password")
    user.groups.add(Group.objects.get(name="operator"))
    client.force_login(user)
    candidates_before = Candidate.objects.count()

    response = client.post(_url(route, world.ids), {})

    assert response.status_code == 403
    assert Candidate.objects.count() == candidates_before
