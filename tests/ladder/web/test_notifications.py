"""The notifications page: webhooks edited by operators and read by viewers, secrets
shown once and never again, refused targets, the delivery log (a fixed number of queries
however long), fragments, and every write audited."""

from __future__ import annotations

import uuid
from datetime import timedelta
from typing import Any

import pytest
from django.test import Client

from billing.models import AuditEntry
from ladder.crypto import decrypt_credential
from ladder.models import NotificationDelivery, Webhook
from ladder.services import enqueue
from omniroute_admin import dashboard
from tests.ladder.factories import NOW, WEBHOOK_SECRET, make_webhook
from tests.ladder.web.test_queries import page_queries
from tests.pages import parse, top_elements
from tests.worlds import htmx_headers, signed_in

pytestmark = pytest.mark.django_db

URL = "/notifications/"
SECRET_PATH = "/services/T0AAAA/B0BBBB/SLACKPATHSECRET"


@pytest.fixture(autouse=True)
def _pinned_now(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(dashboard, "current_time", lambda: NOW)


@pytest.fixture
def queued(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    sent: list[str] = []
    monkeypatch.setattr(enqueue, "send_delivery", sent.append)
    return sent


@pytest.fixture
def operator(client: Client) -> Client:
    return signed_in(client, "olga", "operator")


def form_data(**overrides: Any) -> dict[str, Any]:
    data: dict[str, Any] = {
        "name": "ops",
        "url": "https://93.184.216.34/hooks/omniroute",
        "format": "json",
        "kinds": ["plan_exhausted", "plan_back", "budget_crossed"],
        "is_active": "on",
        "secret": "",
    }
    data.update(overrides)
    return data


def log_row(webhook: Webhook | None, n: int, **fields: Any) -> NotificationDelivery:
    values: dict[str, Any] = {
        "delivery_id": uuid.uuid4(),
        "webhook": webhook,
        "webhook_name": webhook.name if webhook else "gone",
        "event_key": f"plan:claude-max-1#{n}",
        "kind": "plan_exhausted",
        "summary": f"Plan connection claude-max-1 dropped out ({n}).",
        "occurred_at": NOW - timedelta(seconds=n),
        "created_at": NOW - timedelta(seconds=n),
        "status": NotificationDelivery.Status.DELIVERED,
        "attempts": 1,
        "status_code": 200,
        "last_attempt_at": NOW - timedelta(seconds=n),
    }
    values.update(fields)
    return NotificationDelivery(**values)


def state() -> dict[str, Any]:
    return {
        "webhooks": list(Webhook.objects.order_by("pk").values()),
        "deliveries": list(NotificationDelivery.objects.order_by("pk").values()),
        "audit": AuditEntry.objects.count(),
    }


# --- reading --------------------------------------------------------------------------------


def test_the_page_lists_webhooks_and_the_delivery_log(client: Client) -> None:
    webhook = make_webhook()
    log_row(webhook, 1, status_code=503, status="pending", error="Answered 503.").save()
    signed_in(client, "victor", "viewer")

    response = client.get(URL)

    assert response.status_code == 200
    page = parse(response.content)
    (row,) = page.find_all(lambda e: e.attrs.get("id") == f"webhook-{webhook.pk}")
    assert "https://93.184.216.34/…" in row.text
    (entry,) = page.find_all(
        lambda e: e.tag == "tr" and e.attrs.get("id", "").startswith("delivery-")
    )
    assert "Plan connection dropped out" in entry.text
    assert "503" in entry.text
    assert "Answered 503." in entry.text
    assert b'aria-current="page">Notifications<' in response.content


@pytest.mark.parametrize("partial", ["webhook-table", "delivery-log"])
def test_each_partial_renders_alone_for_htmx(client: Client, partial: str) -> None:
    make_webhook()
    signed_in(client, "victor", "viewer")

    full = client.get(URL)
    fragment = client.get(URL, headers=htmx_headers(partial))

    assert f'id="{partial}"'.encode() in full.content
    assert fragment.status_code == 200
    assert b"<html" not in fragment.content
    assert [e.attrs.get("id") for e in top_elements(parse(fragment.content))] == [partial]
    assert "HX-Request" in fragment["Vary"]


def test_a_viewer_sees_no_edit_control(client: Client) -> None:
    make_webhook()
    signed_in(client, "victor", "viewer")

    page = parse(client.get(URL).content)

    assert [f for f in page.by_tag("form") if f.attrs.get("method") == "post"] == [
        f for f in page.by_tag("form") if f.attrs.get("action") == "/accounts/logout/"
    ]


def test_neither_the_secret_nor_the_url_path_is_ever_in_the_html(operator: Client) -> None:
    webhook = make_webhook(url="https://93.184.216.34" + SECRET_PATH)

    pages = [
        operator.get(url).content.decode()
        for url in (URL, f"{URL}?edit={webhook.pk}", f"{URL}?rotate={webhook.pk}")
    ]

    for html in pages:
        assert WEBHOOK_SECRET not in html
        assert "SLACKPATHSECRET" not in html
    assert 'name="secret"' in pages[1]
    assert 'value="' not in pages[1].split('name="secret"')[1][:80]


def test_the_delivery_log_runs_a_fixed_number_of_queries_at_500_rows(operator: Client) -> None:
    webhook = make_webhook()
    empty = page_queries(operator, URL)
    NotificationDelivery.objects.bulk_create(log_row(webhook, n) for n in range(500))

    counts = [page_queries(operator, url) for url in (URL, f"{URL}?page=7", f"{URL}?page=10")]

    # Role, webhooks, log count, log page (an empty log needs no page query).
    assert (empty, counts) == (3, [4, 4, 4])
    assert b"Page 10 of 10 (500 deliveries)" in operator.get(f"{URL}?page=10").content


def test_hostile_text_renders_inert(operator: Client) -> None:
    payload = '<script>alert(1)</script>"><img src=x onerror=alert(1)>'
    webhook = make_webhook(name="x<img src=x onerror=alert(1)>")
    log_row(webhook, 1, summary=payload, error=payload).save()

    page = parse(operator.get(URL).content)

    assert [s.text for s in page.by_tag("script")] == ["", "", ""]
    assert page.by_tag("img") == []
    assert payload in page.text


# --- writes ---------------------------------------------------------------------------------


def test_a_generated_secret_is_shown_in_the_create_response_alone(operator: Client) -> None:
    response = operator.post("/notifications/webhooks/create/", form_data())

    webhook = Webhook.objects.get()
    secret = decrypt_credential(webhook.secret_ciphertext)
    assert response.status_code == 200
    assert secret.encode() in response.content
    assert "no-store" in response["Cache-Control"]
    assert secret.encode() not in operator.get(URL).content
    assert (webhook.name, webhook.kinds, webhook.is_active) == (
        "ops",
        ["plan_exhausted", "plan_back", "budget_crossed"],
        True,
    )
    audit = AuditEntry.objects.get(target_type="webhook")
    assert (audit.action, audit.actor, audit.after["target"]) == (
        "create",
        "olga",
        "https://93.184.216.34/…",
    )


def test_an_entered_secret_is_kept_and_never_echoed(operator: Client) -> None:
    response = operator.post(
        "/notifications/webhooks/create/", form_data(secret="whsec_my-own-secret-123456")
    )

    assert response.status_code == 302
    assert b"whsec_my-own-secret-123456" not in operator.get(response["Location"]).content
    assert decrypt_credential(Webhook.objects.get().secret_ciphertext) == (
        "whsec_my-own-secret-123456"
    )


@pytest.mark.parametrize(
    ("url", "message"),
    [
        (
            "http://169.254.169.254/latest/meta-data/",
            "The host 169.254.169.254 is refused: 169.254.169.254 is a cloud metadata address.",
        ),
        (
            "http://127.0.0.1:9000/hook",
            "The host 127.0.0.1 is refused: 127.0.0.1 is a loopback address.",
        ),
        ("file:///etc/passwd", "Only http and https URLs are allowed."),
    ],
)
def test_a_refused_target_is_a_422_and_nothing_changes(
    operator: Client, url: str, message: str
) -> None:
    before = state()

    response = operator.post("/notifications/webhooks/create/", form_data(url=url))

    assert response.status_code == 422
    assert message.encode() in response.content
    assert state() == before


def test_a_duplicate_name_is_a_409_and_nothing_changes(operator: Client) -> None:
    make_webhook()
    before = state()

    response = operator.post(
        "/notifications/webhooks/create/", form_data(url="https://8.8.8.8/other")
    )

    assert response.status_code == 409
    assert b"A webhook named &#x27;ops&#x27; exists already" in response.content
    assert state() == before


def test_an_edit_with_empty_url_and_secret_keeps_both(operator: Client) -> None:
    webhook = make_webhook(url="https://93.184.216.34" + SECRET_PATH)

    response = operator.post(
        f"/notifications/webhooks/{webhook.pk}/update/",
        form_data(name="ops-2", url="", kinds=["readings_stale"], is_active=""),
        headers=htmx_headers("webhook-table"),
    )

    webhook.refresh_from_db()
    assert response.status_code == 200
    assert response["HX-Trigger"] == "deliveries-changed"
    assert (webhook.name, webhook.url, webhook.kinds, webhook.is_active) == (
        "ops-2",
        "https://93.184.216.34" + SECRET_PATH,
        ["readings_stale"],
        False,
    )
    assert decrypt_credential(webhook.secret_ciphertext) == WEBHOOK_SECRET
    audit = AuditEntry.objects.filter(target_type="webhook", action="update").get()
    assert (audit.before["name"], audit.after["name"], audit.after["is_active"]) == (
        "ops",
        "ops-2",
        False,
    )


def test_send_test_queues_a_delivery_the_log_shows(
    operator: Client, queued: list[str], django_capture_on_commit_callbacks: Any
) -> None:
    webhook = make_webhook()

    with django_capture_on_commit_callbacks(execute=True):
        response = operator.post(
            f"/notifications/webhooks/{webhook.pk}/test/", headers=htmx_headers("webhook-table")
        )

    delivery = NotificationDelivery.objects.get()
    assert response.status_code == 200
    assert b"Test notification queued" in response.content
    assert (delivery.kind, delivery.status, delivery.webhook_id) == ("test", "pending", webhook.pk)
    assert queued == [str(delivery.delivery_id)]
    log = operator.get(URL, headers=htmx_headers("delivery-log")).content
    assert b"Test notification" in log
    assert b"not yet" in log


def test_a_new_secret_replaces_the_old_and_is_shown_once(operator: Client) -> None:
    webhook = make_webhook()

    response = operator.post(f"/notifications/webhooks/{webhook.pk}/rotate-secret/")

    webhook.refresh_from_db()
    secret = decrypt_credential(webhook.secret_ciphertext)
    assert secret != WEBHOOK_SECRET
    assert secret.encode() in response.content
    assert "no-store" in response["Cache-Control"]
    assert AuditEntry.objects.filter(target_type="webhook", action="update").get().after == {
        "secret": "[rotated]"
    }


def test_delete_keeps_the_log_rows(operator: Client) -> None:
    webhook = make_webhook()
    log_row(webhook, 1).save()

    response = operator.post(f"/notifications/webhooks/{webhook.pk}/delete/")

    assert response.status_code == 302
    assert Webhook.objects.count() == 0
    assert list(NotificationDelivery.objects.values_list("webhook_id", "webhook_name")) == [
        (None, "ops")
    ]
    assert AuditEntry.objects.filter(target_type="webhook", action="delete").count() == 1


def test_writes_to_an_unknown_webhook_are_404s(operator: Client) -> None:
    before = state()

    statuses = [
        operator.post(f"/notifications/webhooks/999/{action}/", form_data()).status_code
        for action in ("update", "delete", "test", "rotate-secret")
    ]

    assert statuses == [404, 404, 404, 404]
    assert state() == before


def test_a_viewer_gets_403_on_every_notification_write_and_nothing_changes(
    client: Client, queued: list[str]
) -> None:
    webhook = make_webhook()
    log_row(webhook, 1).save()
    before = state()
    signed_in(client, "victor", "viewer")
    writes = [
        ("/notifications/webhooks/create/", form_data(name="sneaky")),
        (f"/notifications/webhooks/{webhook.pk}/update/", form_data(name="sneaky")),
        (f"/notifications/webhooks/{webhook.pk}/delete/", {}),
        (f"/notifications/webhooks/{webhook.pk}/test/", {}),
        (f"/notifications/webhooks/{webhook.pk}/rotate-secret/", {}),
    ]

    statuses = [client.post(url, data).status_code for url, data in writes]

    assert statuses == [403] * len(writes)
    assert state() == before
    assert queued == []
