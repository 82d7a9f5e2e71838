"""Dashboard access, fragments, headers and escaping, across every page and write."""

from __future__ import annotations

from typing import Any

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client

from billing.models import AuditEntry, BillingCatalogEntry, ModelPrice
from ladder.models import ApiToken, Connection, LadderSettings
from ladder.services import enqueue
from ladder.tokens import create_token
from omniroute_admin import dashboard
from tests.ladder.factories import NOW, make_candidate, make_connection, make_reading
from tests.pages import Element, parse, top_elements
from tests.worlds import htmx_headers, seed_demo_world, signed_in

pytestmark = pytest.mark.django_db

PAGES = (
    "/",
    "/connections/",
    "/connections/claude-max-1/",
    "/candidates/",
    "/pools/",
    "/catalog/",
    "/prices/",
    "/settings/",
    "/tokens/",
    "/notifications/",
)

# Every partial of every page: (page URL, partial name = the id of the element it replaces).
PARTIALS = (
    ("/", "ladder-status"),
    ("/connections/", "connections-table"),
    ("/connections/", "refresh-notice"),
    ("/connections/claude-max-1/", "connection-status"),
    ("/candidates/", "candidates-table"),
    ("/candidates/", "candidate-add"),
    ("/pools/", "pool-table"),
    ("/catalog/", "catalog-table"),
    ("/prices/", "price-table"),
    ("/prices/", "price-import"),
    ("/settings/", "settings-form"),
    ("/tokens/", "token-table"),
    ("/notifications/", "webhook-table"),
    ("/notifications/", "delivery-log"),
)


@pytest.fixture(autouse=True)
def _pinned_now(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(dashboard, "current_time", lambda: NOW)


@pytest.fixture
def demo() -> None:
    seed_demo_world(NOW, history=False)


# --- sign in and roles ----------------------------------------------------------------------


@pytest.mark.parametrize("url", PAGES)
def test_anonymous_is_sent_to_the_login_page(client: Client, url: str) -> None:
    response = client.get(url)

    assert (response.status_code, response["Location"]) == (302, f"/accounts/login/?next={url}")


def test_anonymous_fragment_request_redirects_the_browser_to_login(client: Client) -> None:
    response = client.get(
        "/pools/",
        headers={**htmx_headers("pool-table"), "HX-Current-URL": "http://testserver/pools/"},
    )

    assert response.status_code == 200
    assert response["HX-Redirect"] == "/accounts/login/?next=%2Fpools%2F"


@pytest.mark.parametrize("url", PAGES)
def test_a_signed_in_user_without_a_role_is_forbidden(demo: None, client: Client, url: str) -> None:
    signed_in(client, "nobody", None)

    assert client.get(url).status_code == 403


@pytest.mark.parametrize("role", ["viewer", "operator", "superuser"])
@pytest.mark.parametrize("url", PAGES)
def test_every_role_reads_every_page(demo: None, client: Client, role: str, url: str) -> None:
    signed_in(client, f"user-{role}", role)

    assert client.get(url).status_code == 200


def _database_state() -> dict[str, Any]:
    return {
        "catalog": list(BillingCatalogEntry.objects.order_by("pk").values()),
        "prices": list(ModelPrice.objects.order_by("pk").values()),
        "settings": list(LadderSettings.objects.values()),
        "tokens": list(ApiToken.objects.order_by("pk").values()),
        "connections": list(Connection.objects.order_by("pk").values()),
        "audit": AuditEntry.objects.count(),
    }


def _writes() -> list[tuple[str, dict[str, Any]]]:
    entry = BillingCatalogEntry.objects.get(provider="openai")
    price = ModelPrice.objects.get(provider="openai", model="gpt-4o")
    token, _ = create_token("edge-1", "gateway")
    catalog = {
        "provider": "openai",
        "auth_type": "",
        "billing": "subscription",
        "overage": "hard-stop",
        "reason": "a viewer tried",
        "version": str(entry.version),
    }
    return [
        ("/connections/claude-max-1/refresh/", {}),
        (
            "/settings/update/",
            {
                "exit_cutoff_percent": "50",
                "reentry_min_remaining_percent": "60",
                "budget_window": "day",
                "max_state_age_seconds": "10",
                "base_cooldown_seconds": "1",
                "max_cooldown_seconds": "2",
                "cheap_max_input_usd_per_mtok": "9",
            },
        ),
        ("/tokens/create/", {"name": "sneaky", "scope": "operator"}),
        (f"/tokens/{token.pk}/revoke/", {}),
        ("/catalog/create/", {**catalog, "provider": "newco"}),
        (f"/catalog/{entry.pk}/update/", catalog),
        (f"/catalog/{entry.pk}/delete/", {}),
        (
            "/prices/save/",
            {
                "provider": "openai",
                "model": "gpt-4o",
                "input_usd_per_mtok": "0",
                "output_usd_per_mtok": "0",
                "tier_override": "free",
            },
        ),
        (f"/prices/{price.pk}/delete/", {}),
        (
            "/prices/import/",
            {
                "file": SimpleUploadedFile(
                    "prices.json",
                    b'{"m": {"mode": "chat",'
                    b' "litellm_provider": "x", "input_cost_per_token": 0,'
                    b' "output_cost_per_token": 0}}',
                )
            },
        ),
    ]


def test_a_viewer_gets_403_on_every_write_and_nothing_changes(
    demo: None, client: Client, monkeypatch: pytest.MonkeyPatch
) -> None:

    queued: list[Any] = []
    monkeypatch.setattr(enqueue, "send_refresh", lambda **kw: queued.append(kw))
    writes = _writes()
    before = _database_state()
    signed_in(client, "victor", "viewer")

    statuses = [client.post(url, data).status_code for url, data in writes]

    assert statuses == [403] * len(writes)
    assert _database_state() == before
    assert queued == []


def test_anonymous_writes_go_to_the_login_page_and_nothing_changes(
    demo: None, client: Client
) -> None:
    writes = _writes()
    before = _database_state()

    statuses = [client.post(url, data).status_code for url, data in writes]

    assert statuses == [302] * len(writes)
    assert _database_state() == before


@pytest.mark.parametrize("url", PAGES)
def test_a_viewer_sees_no_edit_controls(demo: None, client: Client, url: str) -> None:
    signed_in(client, "victor", "viewer")

    page = parse(client.get(url).content)

    post_forms = [
        form.attrs.get("action")
        for form in page.by_tag("form")
        if form.attrs.get("method") == "post"
    ]
    assert post_forms == ["/accounts/logout/"]
    assert page.find_all(lambda e: "hx-post" in e.attrs) == []


# --- pages and fragments --------------------------------------------------------------------


@pytest.mark.parametrize(("url", "partial"), PARTIALS)
def test_each_partial_is_in_its_full_page(
    demo: None, client: Client, url: str, partial: str
) -> None:
    signed_in(client, "olga", "operator")

    response = client.get(url)

    assert b"<html" in response.content
    assert parse(response.content).by_id(partial).tag in ("section", "div")


@pytest.mark.parametrize(("url", "partial"), PARTIALS)
def test_each_partial_renders_alone_for_htmx(
    demo: None, client: Client, url: str, partial: str
) -> None:
    signed_in(client, "olga", "operator")

    response = client.get(url, headers=htmx_headers(partial))

    assert b"<html" not in response.content
    assert [element.attrs.get("id") for element in top_elements(parse(response.content))] == [
        partial
    ]


@pytest.mark.parametrize("url", PAGES)
def test_pages_and_fragments_vary_on_the_htmx_header(demo: None, client: Client, url: str) -> None:
    signed_in(client, "olga", "operator")

    page = client.get(url)
    fragment = client.get(url, headers={"HX-Request": "true"})

    assert "HX-Request" in page["Vary"]
    assert "HX-Request" in fragment["Vary"]


def test_every_hx_get_keeps_a_real_href(demo: None, client: Client) -> None:
    signed_in(client, "olga", "operator")
    pages = [parse(client.get(url).content) for url in (*PAGES, "/catalog/?edit=1", "/tokens/")]

    links = [
        e for page in pages for e in page.find_all(lambda e: e.tag == "a" and "hx-get" in e.attrs)
    ]

    assert links
    assert [link for link in links if not link.attrs.get("href", "").startswith("/")] == []


def test_csrf_token_travels_in_hx_headers_on_body(demo: None, client: Client) -> None:
    signed_in(client, "olga", "operator")

    body = parse(client.get("/").content).by_tag("body")[0]

    assert body.attrs["hx-headers"].startswith('{"X-CSRFToken": "')


def test_no_inline_script_style_or_event_handler_on_any_page(demo: None, client: Client) -> None:
    signed_in(client, "olga", "operator")

    for url in (*PAGES, "/catalog/?edit=1", "/catalog/?delete=1", "/prices/?edit=1"):
        page = parse(client.get(url).content)
        assert [s.attrs.get("src") for s in page.by_tag("script")] == [
            "/static/vendor/htmx.min.js",
            "/static/vendor/idiomorph.min.js",
            "/static/dashboard.js",
        ], url
        assert page.by_tag("style") == [], url
        assert [e.tag for e in page.iter() if "style" in e.attrs or _handlers(e)] == [], url


def _handlers(element: Element) -> list[str]:
    return [name for name in element.attrs if name.startswith(("on", "hx-on"))]


# --- stored XSS -----------------------------------------------------------------------------

PAYLOADS = (
    "<script>alert(1)</script>",
    '"><img src=x onerror=alert(1)>',
    "hx-get=/x",
    "hx-on:click=alert(1)",
)


def _hostile_world() -> None:
    # Every payload in each text field, as long as the field allows (providers: 64).
    payload = " ".join(PAYLOADS)
    for index, provider in enumerate(PAYLOADS):
        make_connection(f"xss-{index}", provider=provider, auth_type="apikey", label=payload)
        make_candidate(provider, payload, connection_id=f"xss-{index}", categories=("chat",))
        BillingCatalogEntry.objects.create(
            provider=provider,
            auth_type="oauth",
            billing="metered",
            overage="unknown",
            reason=payload,
        )
    make_connection("xss-plan", provider="claude", auth_type="oauth", label=payload)
    make_reading("xss-plan", remaining_percent=1.0)
    Connection.objects.filter(connection_id="xss-plan").update(quota_error=payload)
    make_candidate("claude", payload, connection_id="xss-plan", categories=("chat",))


@pytest.mark.parametrize(
    "url",
    [
        "/",
        "/connections/",
        "/connections/xss-0/",
        "/connections/xss-plan/",
        "/pools/",
        "/pools/?auto_id=auto/thrifty",
        "/catalog/",
        "/prices/",
    ],
)
def test_hostile_operator_and_gateway_text_renders_inert(client: Client, url: str) -> None:
    _hostile_world()
    signed_in(client, "olga", "operator")

    page = parse(client.get(url).content)

    scripts = page.by_tag("script")
    assert [script.attrs.get("src") for script in scripts] == [
        "/static/vendor/htmx.min.js",
        "/static/vendor/idiomorph.min.js",
        "/static/dashboard.js",
    ]
    assert [script.text for script in scripts] == ["", "", ""]
    assert page.by_tag("img") == []
    assert [e.attrs for e in page.iter() if _handlers(e)] == []
    assert page.find_all(lambda e: e.attrs.get("hx-get") == "/x") == []


def test_hostile_text_is_shown_as_text(client: Client) -> None:
    _hostile_world()
    signed_in(client, "olga", "operator")

    page = parse(client.get("/connections/").content)

    assert '<script>alert(1)</script> "><img src=x onerror=alert(1)> hx-get=/x' in page.text
    rows = {
        row.attrs["data-connection"]: row
        for row in page.find_all(lambda e: "data-connection" in e.attrs)
    }
    for index, provider in enumerate(PAYLOADS):
        assert rows[f"xss-{index}"].by_tag("td")[0].text.endswith(f"{provider} · apikey")


# --- connection edit, add and delete (appended with those views) ----------------------------


def _connection_writes() -> list[tuple[str, dict[str, Any]]]:
    fields = {
        "provider": "claude",
        "auth_type": "oauth",
        "label": "a viewer tried",
        "active": "on",
        "quota_source": "claude",
    }
    return [
        ("/connections/claude-max-1/edit/", {**fields, "credential": "sk-viewer-tried"}),
        ("/connections/claude-max-1/edit/", {**fields, "clear_credential": "on"}),
        ("/connections/add/", {**fields, "connection_id": "viewer-added"}),
        ("/connections/claude-max-1/delete/", {}),
    ]


def test_a_viewer_gets_403_on_every_connection_write_and_nothing_changes(
    demo: None, client: Client
) -> None:
    before = _database_state()
    signed_in(client, "victor", "viewer")

    statuses = [client.post(url, data).status_code for url, data in _connection_writes()]

    assert statuses == [403] * len(_connection_writes())
    assert _database_state() == before


def test_anonymous_connection_writes_go_to_the_login_page_and_nothing_changes(
    demo: None, client: Client
) -> None:
    before = _database_state()

    responses = [client.post(url, data) for url, data in _connection_writes()]

    assert [(r.status_code, r["Location"]) for r in responses] == [
        (302, f"/accounts/login/?next={url}") for url, _ in _connection_writes()
    ]
    assert _database_state() == before


def test_connection_writes_need_the_csrf_token(demo: None) -> None:
    client = Client(enforce_csrf_checks=True)
    signed_in(client, "olga", "operator")
    before = _database_state()

    statuses = [client.post(url, data).status_code for url, data in _connection_writes()]

    assert statuses == [403] * len(_connection_writes())
    assert _database_state() == before
