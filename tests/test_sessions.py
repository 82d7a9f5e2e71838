"""Dashboard sessions: idle and absolute timeouts, polls are not activity, and a new
session key at sign-in."""

from __future__ import annotations

import socket
import time
from typing import Any

import pytest
from django.contrib.auth.models import Group, User
from django.test import Client, override_settings

from ladder import metrics

pytestmark = pytest.mark.django_db


@pytest.fixture
def viewer_client(client: Client) -> Client:
    user = User.objects.create_user("vera", password="a-long-test-password")
    user.groups.add(Group.objects.get_or_create(name="viewer")[0])
    client.force_login(user)
    return client


def _set_session(client: Client, **values: float) -> None:
    session = client.session
    session.update(values)
    session.save()


def test_an_active_session_reaches_the_dashboard(viewer_client: Client) -> None:
    response = viewer_client.get("/")

    assert response.status_code == 200


@override_settings(SESSION_IDLE_TIMEOUT_SECONDS=60)
def test_an_idle_session_is_signed_out(viewer_client: Client) -> None:
    _set_session(viewer_client, last_seen=time.time() - 61)

    response = viewer_client.get("/")

    assert response.status_code == 302
    assert response["Location"].startswith("/accounts/login/")


@override_settings(SESSION_COOKIE_AGE=3600)
def test_a_session_older_than_the_absolute_limit_is_signed_out(viewer_client: Client) -> None:
    _set_session(viewer_client, signed_in_at=time.time() - 3601, last_seen=time.time())

    response = viewer_client.get("/")

    assert response.status_code == 302


@override_settings(SESSION_IDLE_TIMEOUT_SECONDS=60)
def test_live_update_polls_do_not_count_as_activity(viewer_client: Client) -> None:
    idle_since = time.time() - 50
    _set_session(viewer_client, last_seen=idle_since)

    viewer_client.get("/", HTTP_HX_REQUEST="true")

    assert viewer_client.session["last_seen"] == idle_since


def test_signing_in_starts_a_new_session_key(client: Client) -> None:
    User.objects.create_user("olga", password="a-long-test-password")
    client.get("/accounts/login/")
    before = client.cookies["sessionid"].value if "sessionid" in client.cookies else None

    client.post("/accounts/login/", {"username": "olga", "password": "a-long-test-password"})

    assert client.cookies["sessionid"].value != before


@override_settings(LOGIN_MAX_FAILURES_PER_USER=3)
def test_failed_sign_ins_are_throttled_even_with_the_right_password(client: Client) -> None:
    from django.core.cache import cache

    cache.clear()
    User.objects.create_user("olga", password="a-long-test-password")
    for _ in range(3):
        wrong = client.post("/accounts/login/", {"username": "olga", "password": "nope"})
        assert wrong.status_code == 200
        assert "Please enter a correct username and password" in wrong.content.decode()

    right = client.post(
        "/accounts/login/", {"username": "olga", "password": "a-long-test-password"}
    )

    assert right.status_code == 200
    assert "Too many failed sign-ins. Wait 15 minutes" in right.content.decode()
    assert "_auth_user_id" not in client.session


@override_settings(LOGIN_MAX_FAILURES_PER_USER=3)
def test_a_successful_sign_in_before_the_limit_resets_the_count(client: Client) -> None:
    from django.core.cache import cache

    cache.clear()
    User.objects.create_user("olga", password="a-long-test-password")
    for _ in range(2):
        client.post("/accounts/login/", {"username": "olga", "password": "nope"})
    client.post("/accounts/login/", {"username": "olga", "password": "a-long-test-password"})
    client.logout()

    for _ in range(2):
        client.post("/accounts/login/", {"username": "olga", "password": "nope"})
    again = client.post(
        "/accounts/login/", {"username": "olga", "password": "a-long-test-password"}
    )

    assert again.status_code == 302


@override_settings(LOGIN_MAX_FAILURES_PER_USER=3, LOGIN_MAX_FAILURES_PER_ADDRESS=1000)
def test_admin_sign_in_is_throttled_even_with_the_right_password(client: Client) -> None:
    from django.core.cache import cache

    cache.clear()
    User.objects.create_superuser("root", password="a-long-test-password")
    for _ in range(3):
        wrong = client.post("/admin/login/", {"username": "root", "password": "nope"})
        assert wrong.status_code == 200
        assert "Please enter the correct username and password" in wrong.content.decode()

    right = client.post("/admin/login/", {"username": "root", "password": "a-long-test-password"})

    assert right.status_code == 200
    assert "Too many failed sign-ins. Wait 15 minutes" in right.content.decode()
    assert "_auth_user_id" not in client.session
    assert client.get("/admin/").status_code == 302


@override_settings(LOGIN_MAX_FAILURES_PER_USER=4, LOGIN_MAX_FAILURES_PER_ADDRESS=1000)
def test_dashboard_and_admin_sign_ins_share_one_failure_budget(client: Client) -> None:
    from django.core.cache import cache

    cache.clear()
    User.objects.create_superuser("root", password="a-long-test-password")
    for path in ("/accounts/login/", "/admin/login/") * 2:
        client.post(path, {"username": "root", "password": "nope"})

    for path in ("/admin/login/", "/accounts/login/"):
        right = client.post(path, {"username": "root", "password": "a-long-test-password"})
        assert right.status_code == 200
        assert "Too many failed sign-ins" in right.content.decode()
    assert "_auth_user_id" not in client.session


@override_settings(LOGIN_MAX_FAILURES_PER_USER=3)
def test_admin_sign_in_under_the_limit_still_works(client: Client) -> None:
    from django.core.cache import cache

    cache.clear()
    User.objects.create_superuser("root", password="a-long-test-password")
    client.post("/admin/login/", {"username": "root", "password": "nope"})

    right = client.post("/admin/login/", {"username": "root", "password": "a-long-test-password"})

    assert right.status_code == 302
    assert client.get("/admin/").status_code == 200


@pytest.fixture
def cache_down(settings: Any) -> None:
    """Django's cache on a Redis that is not there (a port nothing listens on)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    settings.CACHES = {
        "default": {
            "BACKEND": "django.core.cache.backends.redis.RedisCache",
            "LOCATION": f"redis://127.0.0.1:{port}/0",
        }
    }


def _unavailable_count() -> float:
    return metrics.REGISTRY.get_sample_value("omniroute_login_throttle_unavailable_total") or 0.0


@pytest.mark.parametrize("path", ["/accounts/login/", "/admin/login/"])
def test_with_the_sign_in_cache_down_a_sign_in_fails_open_logged_and_counted(
    client: Client, cache_down: None, path: str, caplog: pytest.LogCaptureFixture
) -> None:
    User.objects.create_superuser("root", password="a-long-test-password")
    before = _unavailable_count()

    right = client.post(path, {"username": "root", "password": "a-long-test-password"})

    assert right.status_code == 302
    assert client.session["_auth_user_id"] == str(User.objects.get(username="root").pk)
    assert _unavailable_count() - before == 1
    assert [r.getMessage() for r in caplog.records if r.name.endswith("login_throttle")] == [
        "sign-in throttle unavailable (read failed: ConnectionError): "
        "attempt let through unthrottled"
    ]


@pytest.mark.parametrize("path", ["/accounts/login/", "/admin/login/"])
def test_with_the_sign_in_cache_down_a_wrong_password_is_the_form_error_not_a_500(
    cache_down: None, path: str
) -> None:
    User.objects.create_superuser("root", password="a-long-test-password")
    client = Client(raise_request_exception=False)

    wrong = client.post(path, {"username": "root", "password": "nope"})

    assert wrong.status_code == 200
    assert "correct username and password" in wrong.content.decode()
    assert "_auth_user_id" not in client.session
