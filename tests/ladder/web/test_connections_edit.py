"""Operators edit, add and delete connections in the dashboard. The credential is
write-only: it is stored encrypted and never rendered, echoed or logged."""

from __future__ import annotations

import logging
from typing import Any

import pytest
from django.test import Client
from django.views.debug import SafeExceptionReporterFilter

from ladder.crypto import decrypt_credential
from ladder.models import Connection, QuotaReading
from omniroute_admin import dashboard
from tests.ladder.factories import NOW, make_candidate, make_connection, make_reading
from tests.ladder.web.test_queries import PAGE_QUERIES, page_queries
from tests.pages import Element, parse, top_elements
from tests.worlds import htmx_headers, signed_in

pytestmark = pytest.mark.django_db

# A credential no response body and no log line may ever contain.
CANARY = "sk-CANARY-7f3a9c-do-not-render"
STORED = "sk-stored-credential-0001"
PAGE = "/connections/claude-max-1/"
EDIT = "/connections/claude-max-1/edit/"
DELETE = "/connections/claude-max-1/delete/"
ADD = "/connections/add/"
NO_KEY = "No credential key is configured (OMNIROUTE_CREDENTIAL_KEY): the credential was not stored"
VALID = {
    "provider": "claude",
    "auth_type": "oauth",
    "label": "Team plan",
    "active": "on",
    "quota_source": "claude",
}


@pytest.fixture(autouse=True)
def _pinned_now(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(dashboard, "current_time", lambda: NOW)


@pytest.fixture
def stored() -> Connection:
    return make_connection(
        "claude-max-1",
        provider="claude",
        auth_type="oauth",
        label="Team plan",
        quota_source="claude",
        credential=STORED,
    )


@pytest.fixture
def operator(client: Client) -> Client:
    return signed_in(client, "olga", "operator")


@pytest.fixture
def viewer(client: Client) -> Client:
    return signed_in(client, "victor", "viewer")


def _state(connection_id: str = "claude-max-1") -> Any:
    return Connection.objects.values().get(connection_id=connection_id)


def _all_connections() -> Any:
    return list(Connection.objects.order_by("pk").values())


def _credential_inputs(page: Element) -> list[dict[str, str | None]]:
    return [
        element.attrs
        for element in page.find_all(
            lambda e: e.tag == "input" and e.attrs.get("name") == "credential"
        )
    ]


def _summary(page: Element) -> list[str]:
    return [li.text for li in page.by_class("error-summary")[0].by_tag("li")]


def _messages(page: Element) -> list[str]:
    return [li.text for li in page.by_class("messages")[0].by_tag("li")]


# --- edit -------------------------------------------------------------------------------------


def test_edit_saves_every_field(stored: Connection, operator: Client) -> None:
    data = {
        "provider": "openai",
        "auth_type": "none",
        "label": "Free tier",
        "quota_source": "none",
    }  # "active" unticked

    response = operator.post(EDIT, data, headers=htmx_headers("connection-edit"))

    assert response.status_code == 200
    row = _state()
    assert (
        row["provider"],
        row["auth_type"],
        row["label"],
        row["is_active"],
        row["quota_source"],
    ) == ("openai", "none", "Free tier", False, "none")
    assert decrypt_credential(row["credential_ciphertext"]) == STORED
    page = parse(response.content)
    assert page.by_class("notice")[0].text == "Saved claude-max-1."
    assert page.by_id("id_label").attrs["value"] == "Free tier"
    assert "checked" not in page.by_id("id_active").attrs


def test_edit_over_htmx_reloads_the_status_and_the_title(
    stored: Connection, operator: Client
) -> None:
    response = operator.post(
        EDIT, {**VALID, "label": "Renamed"}, headers=htmx_headers("connection-edit")
    )

    assert response["HX-Trigger"] == "connection-saved"
    title = parse(response.content).by_id("connection-title")
    assert (title.attrs.get("hx-swap-oob"), title.text) == ("true", "claude-max-1 Renamed")
    status = parse(operator.get(PAGE).content).by_id("connection-status")
    assert status.attrs["hx-trigger"] == "every 5s, connection-saved from:body"


def test_edit_with_a_new_credential_replaces_the_stored_one(
    stored: Connection, operator: Client
) -> None:
    before = _state()["credential_ciphertext"]

    operator.post(EDIT, {**VALID, "credential": CANARY}, headers=htmx_headers("connection-edit"))

    after = _state()["credential_ciphertext"]
    assert after != before
    assert CANARY not in after
    assert decrypt_credential(after) == CANARY


def test_edit_with_an_empty_credential_keeps_the_stored_one(
    stored: Connection, operator: Client
) -> None:
    before = _state()["credential_ciphertext"]

    response = operator.post(
        EDIT, {**VALID, "label": "Kept", "credential": ""}, headers=htmx_headers("connection-edit")
    )

    assert response.status_code == 200
    assert (_state()["label"], _state()["credential_ciphertext"]) == ("Kept", before)


def test_edit_with_clear_ticked_clears_the_stored_credential(
    stored: Connection, operator: Client
) -> None:
    response = operator.post(
        EDIT, {**VALID, "clear_credential": "on"}, headers=htmx_headers("connection-edit")
    )

    assert response.status_code == 200
    assert _state()["credential_ciphertext"] == ""
    state = parse(response.content).by_class("credential-state")[0]
    assert state.text == "no credential"


def test_edit_shows_only_whether_a_credential_is_stored(
    stored: Connection, operator: Client
) -> None:
    make_connection("keyless-1", provider="openai", auth_type="none")

    stored_page = parse(operator.get(PAGE).content)
    keyless_page = parse(operator.get("/connections/keyless-1/").content)

    assert stored_page.by_class("credential-state")[0].text == "a credential is stored"
    assert keyless_page.by_class("credential-state")[0].text == "no credential"
    assert _credential_inputs(stored_page) == [
        {
            "type": "password",
            "name": "credential",
            "autocomplete": "new-password",
            "maxlength": "8192",
            "aria-describedby": "id_credential_helptext",
            "id": "id_credential",
        }
    ]
    help_text = stored_page.by_id("id_credential").attrs["aria-describedby"]
    assert help_text == "id_credential_helptext"
    assert "Leave empty to keep the stored credential." in stored_page.by_id("connection-edit").text
    assert "none is the keyless no-auth path" in stored_page.by_id("connection-edit").text


def test_edit_refuses_a_new_credential_and_clear_together(
    stored: Connection, operator: Client
) -> None:
    before = _state()

    response = operator.post(
        EDIT,
        {**VALID, "credential": CANARY, "clear_credential": "on"},
        headers=htmx_headers("connection-edit"),
    )

    assert response.status_code == 422
    assert _summary(parse(response.content)) == [
        "Credential: Type a new credential or tick “clear the stored credential”, not both."
    ]
    assert _state() == before
    assert CANARY.encode() not in response.content


def test_edit_without_javascript_redirects_back_with_the_message(
    stored: Connection, operator: Client
) -> None:
    response = operator.post(EDIT, {**VALID, "label": "Plain post", "credential": CANARY})

    assert (response.status_code, response["Location"]) == (302, PAGE)
    page = operator.get(PAGE)
    assert _messages(parse(page.content)) == ["Saved claude-max-1."]
    assert _state()["label"] == "Plain post"
    assert CANARY.encode() not in page.content


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        pytest.param("provider", "", "This field is required.", id="provider-empty"),
        pytest.param("provider", "   ", "This field is required.", id="provider-blank"),
        pytest.param(
            "provider",
            "p" * 65,
            "Ensure this value has at most 64 characters (it has 65).",
            id="provider-too-long",
        ),
        pytest.param(
            "provider", "cla\x00ude", "Null characters are not allowed.", id="provider-nul"
        ),
        pytest.param("auth_type", "", "This field is required.", id="auth-type-empty"),
        pytest.param(
            "auth_type",
            "a" * 65,
            "Ensure this value has at most 64 characters (it has 65).",
            id="auth-type-too-long",
        ),
        pytest.param("auth_type", "oa\x00uth", "Null characters are not allowed.", id="auth-nul"),
        pytest.param(
            "label",
            "l" * 201,
            "Ensure this value has at most 200 characters (it has 201).",
            id="label-too-long",
        ),
        pytest.param("label", "Te\x00am", "Null characters are not allowed.", id="label-nul"),
        pytest.param(
            "quota_source",
            "bogus",
            "Select a valid choice. bogus is not one of the available choices.",
            id="quota-source-unknown",
        ),
        pytest.param(
            "credential",
            CANARY + "c" * (8193 - len(CANARY)),
            "Ensure this value has at most 8192 characters (it has 8193).",
            id="credential-too-long",
        ),
        pytest.param(
            "credential", CANARY + "\x00", "Null characters are not allowed.", id="credential-nul"
        ),
    ],
)
@pytest.mark.parametrize("is_htmx", [True, False], ids=["fragment", "page"])
def test_edit_errors_come_back_by_field_and_nothing_changes(
    stored: Connection,
    operator: Client,
    field: str,
    value: str,
    message: str,
    is_htmx: bool,
) -> None:
    before = _state()
    data = {**VALID, "credential": CANARY, field: value}
    headers = htmx_headers("connection-edit") if is_htmx else {}

    response = operator.post(EDIT, data, headers=headers)

    assert response.status_code == 422
    page = parse(response.content)
    labels = {"provider": "Provider", "auth_type": "Auth type", "label": "Label"}
    labels |= {"quota_source": "Quota source", "credential": "Credential"}
    assert _summary(page) == [f"{labels[field]}: {message}"]
    assert [p.text for p in page.by_class("field-error")] == [message]
    assert (b"<html" in response.content) is not is_htmx
    assert _state() == before
    assert CANARY.encode() not in response.content
    assert _credential_inputs(page)[0].get("value") is None


@pytest.mark.parametrize("is_htmx", [True, False], ids=["fragment", "page"])
def test_edit_without_a_credential_key_says_so_and_nothing_changes(
    stored: Connection, operator: Client, settings: Any, is_htmx: bool
) -> None:
    before = _state()
    settings.OMNIROUTE_CREDENTIAL_KEY = ""
    headers = htmx_headers("connection-edit") if is_htmx else {}

    response = operator.post(
        EDIT, {**VALID, "label": "Not saved", "credential": CANARY}, headers=headers
    )

    assert response.status_code == 422
    page = parse(response.content)
    assert _summary(page) == [f"Credential: {NO_KEY}"]
    assert _state() == before
    assert CANARY.encode() not in response.content


def test_without_a_credential_key_the_other_fields_still_save(
    stored: Connection, operator: Client, settings: Any
) -> None:
    before = _state()["credential_ciphertext"]
    settings.OMNIROUTE_CREDENTIAL_KEY = ""

    response = operator.post(
        EDIT, {**VALID, "label": "Kept key"}, headers=htmx_headers("connection-edit")
    )

    assert response.status_code == 200
    assert (_state()["label"], _state()["credential_ciphertext"]) == ("Kept key", before)


def test_edit_of_a_deleted_connection_creates_nothing(operator: Client) -> None:
    response = operator.post(EDIT, {**VALID, "credential": CANARY})

    assert (response.status_code, response["Location"]) == (302, "/connections/")
    assert Connection.objects.count() == 0
    page = parse(operator.get("/connections/").content)
    assert _messages(page) == ["No connection 'claude-max-1': nothing was saved."]


# --- the credential is never rendered, echoed or logged ---------------------------------------


def _success(client: Client) -> list[bytes]:
    response = client.post(
        EDIT, {**VALID, "credential": CANARY}, headers=htmx_headers("connection-edit")
    )
    return [response.content]


def _success_plain(client: Client) -> list[bytes]:
    response = client.post(EDIT, {**VALID, "credential": CANARY}, follow=True)
    return [response.content]


def _invalid(client: Client) -> list[bytes]:
    data = {**VALID, "provider": "", "credential": CANARY}
    return [
        client.post(EDIT, data, headers=htmx_headers("connection-edit")).content,
        client.post(EDIT, data).content,
    ]


def _added(client: Client) -> list[bytes]:
    data = {**VALID, "connection_id": "new-1", "credential": CANARY}
    return [
        client.post(ADD, data, headers=htmx_headers("connection-add")).content,
        client.post(ADD, {**data, "connection_id": "new-2"}, follow=True).content,
    ]


def _add_refused(client: Client) -> list[bytes]:
    data = {**VALID, "connection_id": "claude-max-1", "credential": CANARY}
    return [
        client.post(ADD, data, headers=htmx_headers("connection-add")).content,
        client.post(ADD, {**data, "connection_id": "bad id"}).content,
    ]


@pytest.mark.parametrize(
    "write",
    [_success, _success_plain, _invalid, _added, _add_refused],
    ids=["saved", "saved-plain-post", "invalid", "added", "add-refused"],
)
def test_the_credential_never_appears_in_a_response_or_a_log(
    stored: Connection, operator: Client, caplog: pytest.LogCaptureFixture, write: Any
) -> None:
    with caplog.at_level(logging.DEBUG):
        bodies = write(operator)
        bodies += [
            operator.get(url, headers=headers).content
            for url in (PAGE, "/connections/", "/connections/new-1/")
            for headers in ({}, {"HX-Request": "true"})
        ]

    assert [CANARY.encode() in body for body in bodies] == [False] * len(bodies)
    assert CANARY not in caplog.text


def test_error_reports_mask_the_credential(stored: Connection, operator: Client) -> None:
    response = operator.post(EDIT, {**VALID, "credential": CANARY})

    masked = SafeExceptionReporterFilter().get_post_parameters(response.wsgi_request)
    assert masked["credential"] == "********************"
    assert masked["label"] == "Team plan"


# --- add --------------------------------------------------------------------------------------


def test_add_registers_a_connection_with_its_credential(operator: Client) -> None:
    response = operator.post(
        ADD,
        {**VALID, "connection_id": "team@claude:1", "credential": CANARY},
        headers=htmx_headers("connection-add"),
    )

    assert (response.status_code, response["HX-Trigger"]) == (200, "connection-saved")
    row = _state("team@claude:1")
    assert (
        row["provider"],
        row["auth_type"],
        row["label"],
        row["is_active"],
        row["quota_source"],
    ) == ("claude", "oauth", "Team plan", True, "claude")
    assert decrypt_credential(row["credential_ciphertext"]) == CANARY
    notice = parse(response.content).by_class("notice")[0]
    assert notice.text == "Added team@claude:1. Open its page"
    assert notice.by_tag("a")[0].attrs["href"] == "/connections/team@claude:1/"


def test_add_without_a_credential_stores_none(operator: Client) -> None:
    operator.post(ADD, {**VALID, "connection_id": "keyless-1", "auth_type": "none"})

    assert _state("keyless-1")["credential_ciphertext"] == ""


def test_add_without_javascript_redirects_to_the_list_with_the_message(
    operator: Client,
) -> None:
    response = operator.post(ADD, {**VALID, "connection_id": "new-1"})

    assert (response.status_code, response["Location"]) == (302, "/connections/")
    page = parse(operator.get("/connections/").content)
    assert _messages(page) == ["Added new-1."]
    assert page.find_all(lambda e: e.attrs.get("data-connection") == "new-1") != []


@pytest.mark.parametrize("is_htmx", [True, False], ids=["fragment", "page"])
def test_add_with_an_existing_id_is_refused_and_nothing_changes(
    stored: Connection, operator: Client, is_htmx: bool
) -> None:
    before = _all_connections()
    headers = htmx_headers("connection-add") if is_htmx else {}

    response = operator.post(
        ADD,
        {**VALID, "connection_id": "claude-max-1", "provider": "openai", "credential": CANARY},
        headers=headers,
    )

    assert response.status_code == 409
    assert _summary(parse(response.content)) == [
        "Connection id: A connection with the id claude-max-1 exists already: "
        "change it on its page."
    ]
    assert _all_connections() == before
    assert CANARY.encode() not in response.content


ID_PATTERN = "Use 1 to 128 of A-Z a-z 0-9 . _ : @ -, and not . or .. alone."


@pytest.mark.parametrize(
    ("connection_id", "messages"),
    [
        pytest.param("", ["This field is required."], id="empty"),
        pytest.param("has space", [ID_PATTERN], id="space"),
        pytest.param("a/b", [ID_PATTERN], id="slash"),
        pytest.param(".", [ID_PATTERN], id="dot"),
        pytest.param("..", [ID_PATTERN], id="dot-dot"),
        pytest.param(
            "x" * 129,
            [ID_PATTERN, "Ensure this value has at most 128 characters (it has 129)."],
            id="too-long",
        ),
    ],
)
def test_add_refuses_an_id_outside_the_gateway_pattern(
    operator: Client, connection_id: str, messages: list[str]
) -> None:
    response = operator.post(
        ADD, {**VALID, "connection_id": connection_id}, headers=htmx_headers("connection-add")
    )

    assert response.status_code == 422
    assert _summary(parse(response.content)) == [f"Connection id: {m}" for m in messages]
    assert Connection.objects.count() == 0


def test_add_without_a_credential_key_says_so_and_adds_nothing(
    operator: Client, settings: Any
) -> None:
    settings.OMNIROUTE_CREDENTIAL_KEY = ""

    response = operator.post(
        ADD,
        {**VALID, "connection_id": "new-1", "credential": CANARY},
        headers=htmx_headers("connection-add"),
    )

    assert response.status_code == 422
    assert _summary(parse(response.content)) == [f"Credential: {NO_KEY}"]
    assert Connection.objects.count() == 0


def test_add_form_opens_with_its_errors(operator: Client) -> None:
    closed = parse(operator.get("/connections/").content).by_class("add-connection")[0]

    response = operator.post(ADD, {**VALID, "connection_id": ""})

    opened = parse(response.content).by_class("add-connection")[0]
    assert ("open" in closed.attrs, "open" in opened.attrs) == (False, True)


def test_the_add_url_is_still_the_page_of_a_connection_named_add(operator: Client) -> None:
    assert operator.get(ADD).status_code == 404
    make_connection("add", label="Named add")

    page = operator.get(ADD)

    assert page.status_code == 200
    assert parse(page.content).by_id("connection-title").text == "add Named add"


# --- delete -----------------------------------------------------------------------------------


def test_delete_asks_first_and_changes_nothing(stored: Connection, operator: Client) -> None:
    before = _all_connections()

    page = parse(operator.get(f"{PAGE}?confirm-delete").content)

    confirm = page.by_id("connection-edit").by_class("confirm")[0]
    assert confirm.attrs["action"] == DELETE
    assert confirm.text.startswith("Delete claude-max-1 with its readings and transitions?")
    assert _all_connections() == before


def test_delete_removes_the_connection_with_its_readings(
    stored: Connection, operator: Client
) -> None:
    make_reading("claude-max-1", remaining_percent=50.0)

    response = operator.post(DELETE)

    assert (response.status_code, response["Location"]) == (302, "/connections/")
    assert (Connection.objects.count(), QuotaReading.objects.count()) == (0, 0)
    assert _messages(parse(operator.get("/connections/").content)) == [
        "Deleted claude-max-1 with its readings and transitions. Candidates that name it "
        "see an unregistered connection (counted as metered) until a gateway registers it "
        "again."
    ]


def test_delete_over_htmx_sends_the_browser_to_the_list(
    stored: Connection, operator: Client
) -> None:
    response = operator.post(DELETE, headers=htmx_headers("connection-edit"))

    assert (response.status_code, response["HX-Redirect"]) == (200, "/connections/")
    assert Connection.objects.count() == 0


def test_delete_of_a_missing_connection_says_so(operator: Client) -> None:
    response = operator.post(DELETE, follow=True)

    assert _messages(parse(response.content)) == [
        "No connection 'claude-max-1': it was deleted already."
    ]


# --- roles ------------------------------------------------------------------------------------


@pytest.mark.parametrize("url", [PAGE, f"{PAGE}?confirm-delete", "/connections/"])
def test_a_viewer_sees_no_edit_controls(stored: Connection, viewer: Client, url: str) -> None:
    page = parse(viewer.get(url).content)

    assert [form.attrs.get("action") for form in page.by_tag("form")] == [
        "/accounts/logout/",
        *(["/connections/"] if url == "/connections/" else []),  # the search
    ]
    assert page.find_all(lambda e: e.attrs.get("name") == "credential") == []
    assert page.find_all(lambda e: (e.attrs.get("href") or "").endswith("confirm-delete")) == []


def test_a_viewer_reads_the_registration_and_whether_a_credential_is_stored(
    stored: Connection, viewer: Client
) -> None:
    facts = parse(viewer.get(PAGE).content).by_id("connection-edit").by_class("facts")[0]

    assert [
        (dt.text, dd.text) for dt, dd in zip(facts.by_tag("dt"), facts.by_tag("dd"), strict=True)
    ] == [
        ("Provider", "claude"),
        ("Auth type", "oauth"),
        ("Label", "Team plan"),
        ("Active", "yes"),
        ("Quota source", "claude"),
        ("Own reserve", "none: the settings' apply"),
        ("Credential", "a credential is stored"),
    ]


@pytest.mark.parametrize(
    ("url", "data"),
    [
        (EDIT, {**VALID, "label": "viewer", "credential": CANARY}),
        (EDIT, {**VALID, "clear_credential": "on"}),
        (ADD, {**VALID, "connection_id": "new-1"}),
        (DELETE, {}),
    ],
    ids=["edit", "clear", "add", "delete"],
)
def test_a_viewer_gets_403_on_each_write_and_nothing_changes(
    stored: Connection, viewer: Client, url: str, data: dict[str, str]
) -> None:
    before = _all_connections()

    statuses = [
        viewer.post(url, data).status_code,
        viewer.post(url, data, headers=htmx_headers("connection-edit")).status_code,
    ]

    assert statuses == [403, 403]
    assert _all_connections() == before


# --- pages and fragments ----------------------------------------------------------------------

PARTIALS = (
    (PAGE, "connection-edit"),
    (f"{PAGE}?confirm-delete", "connection-edit"),
    ("/connections/", "connection-add"),
)


@pytest.mark.parametrize(("url", "partial"), PARTIALS)
def test_each_new_partial_is_in_its_full_page(
    stored: Connection, operator: Client, url: str, partial: str
) -> None:
    response = operator.get(url)

    assert b"<html" in response.content
    assert parse(response.content).by_id(partial).tag == "section"


@pytest.mark.parametrize(("url", "partial"), PARTIALS)
def test_each_new_partial_renders_alone_for_htmx(
    stored: Connection, operator: Client, url: str, partial: str
) -> None:
    response = operator.get(url, headers=htmx_headers(partial))

    assert b"<html" not in response.content
    assert [e.attrs.get("id") for e in top_elements(parse(response.content))] == [partial]


@pytest.mark.parametrize(
    ("url", "data", "partial", "status"),
    [
        (EDIT, VALID, "connection-edit", 200),
        (EDIT, {**VALID, "provider": ""}, "connection-edit", 422),
        (ADD, {**VALID, "connection_id": "new-1"}, "connection-add", 200),
        (ADD, {**VALID, "connection_id": "claude-max-1"}, "connection-add", 409),
    ],
    ids=["edit-saved", "edit-invalid", "added", "add-refused"],
)
def test_each_write_answers_htmx_with_its_partial_alone(
    stored: Connection,
    operator: Client,
    url: str,
    data: dict[str, str],
    partial: str,
    status: int,
) -> None:
    response = operator.post(url, data, headers=htmx_headers(partial))

    assert response.status_code == status
    assert b"<html" not in response.content
    assert [e.attrs.get("id") for e in top_elements(parse(response.content))] == [partial]
    assert "HX-Request" in response["Vary"]


def test_the_edit_and_confirm_states_have_no_inline_script_style_or_handler(
    stored: Connection, operator: Client
) -> None:
    for url in (PAGE, f"{PAGE}?confirm-delete", "/connections/"):
        page = parse(operator.get(url).content)
        assert page.by_tag("style") == [], url
        assert [
            e.tag
            for e in page.iter()
            if "style" in e.attrs or any(name.startswith(("on", "hx-on")) for name in e.attrs)
        ] == [], url


@pytest.mark.parametrize("url", [PAGE, f"{PAGE}?confirm-delete"])
def test_the_edit_panel_adds_no_query_to_the_connection_page(
    stored: Connection, operator: Client, url: str
) -> None:
    # Named by a candidate, as in the demo world (a world without candidates loads no
    # connection views for its decisions).
    make_candidate(connection_id=stored.connection_id)
    assert page_queries(operator, url) == PAGE_QUERIES[PAGE]


@pytest.mark.parametrize("legacy_id", [".", ".."])
@pytest.mark.parametrize(
    ("method", "suffix", "data"),
    [
        pytest.param("get", "", None, id="page"),
        pytest.param("post", "edit/", {**VALID, "label": "renamed"}, id="edit"),
        pytest.param("post", "delete/", {}, id="delete"),
        pytest.param("post", "refresh/", {}, id="refresh"),
    ],
)
def test_dashboard_pages_of_the_ids_dot_and_dot_dot_are_404_without_a_lookup(
    operator: Client, legacy_id: str, method: str, suffix: str, data: Any
) -> None:
    # A row an older release could store: a lookup would find it (a 200 page, an edit,
    # a delete); the id is refused before any lookup instead.
    Connection.objects.create(connection_id=legacy_id, provider="claude", auth_type="oauth")
    before = _all_connections()

    send = getattr(operator, method)
    response = send(f"/connections/{legacy_id}/{suffix}", *([data] if data is not None else []))

    assert response.status_code == 404
    assert _all_connections() == before


def test_a_legacy_row_named_dot_does_not_break_the_lists(operator: Client) -> None:
    Connection.objects.create(connection_id=".", provider="claude", auth_type="oauth")

    for page in ("/", "/connections/", "/pools/"):
        assert operator.get(page).status_code == 200, page


def test_edit_saves_a_connections_own_reserve_and_the_page_says_which_applies(
    stored: Connection, operator: Client
) -> None:
    data = {**VALID, "exit_cutoff_percent": "30", "reentry_min_remaining_percent": "40"}

    response = operator.post(EDIT, data, headers=htmx_headers("connection-edit"))

    assert response.status_code == 200
    row = _state()
    assert (row["exit_cutoff_percent"], row["reentry_min_remaining_percent"]) == (30.0, 40.0)
    assert parse(response.content).by_id("id_exit_cutoff_percent").attrs["value"] == "30.0"
    assert "Exit at or below 30 %; re-entry above 40 % (this connection's own reserve)." in (
        operator.get(PAGE).content.decode()
    )


def test_edit_refuses_a_reserve_floor_below_its_cutoff_naming_both(
    stored: Connection, operator: Client
) -> None:
    before = _all_connections()
    data = {**VALID, "exit_cutoff_percent": "30", "reentry_min_remaining_percent": "10"}

    response = operator.post(EDIT, data, headers=htmx_headers("connection-edit"))

    page = parse(response.content)
    rule = (
        "The re-entry floor (%) must be at least the exit cutoff (%): a connection that drops "
        "out at the cutoff comes back only above the floor."
    )
    assert _summary(page) == [f"Own exit cutoff (%): {rule}", f"Own re-entry floor (%): {rule}"]
    assert _all_connections() == before
