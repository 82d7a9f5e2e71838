"""The connections API: upsert, reads, status, credentials, refresh, hostile ids."""

from __future__ import annotations

import logging
from datetime import datetime, timedelta
from typing import Any

import pytest
from django.utils import timezone

from billing.classify import KEYLESS_VERDICT, UNCURATED_VERDICT
from billing.models import BillingCatalogEntry
from ladder import services
from ladder.core.types import WindowReading
from ladder.crypto import decrypt_credential
from ladder.models import ApiToken, Connection, QuotaReading
from ladder.services import enqueue
from tests.ladder.factories import api, iso, make_connection, make_reading, make_token

pytestmark = pytest.mark.django_db

SECRET = "sk-ant-oat01-very-secret-credential-value"


@pytest.fixture
def gateway() -> str:
    return make_token("gw", ApiToken.Scope.GATEWAY)


def connection_rows() -> list[tuple[Any, ...]]:
    return list(
        Connection.objects.order_by("pk").values_list(
            "connection_id",
            "provider",
            "auth_type",
            "label",
            "is_active",
            "quota_source",
            "credential_ciphertext",
        )
    )


def claude_entry() -> BillingCatalogEntry:
    return BillingCatalogEntry.objects.get(provider="claude", auth_type="oauth")


# --- upsert ------------------------------------------------------------------------------


def test_put_connection_creates_it_with_the_defaults(gateway: str) -> None:
    response = api(
        "put",
        "/api/v1/connections/claude-max-1",
        gateway,
        {"provider": "claude", "auth_type": "oauth"},
    )

    assert response.status_code == 200
    assert response.json() == {
        "connection_id": "claude-max-1",
        "provider": "claude",
        "registered_provider": "claude",
        "auth_type": "oauth",
        "label": "",
        "active": True,
        "quota_source": "none",
        "has_credential": False,
        "exit_cutoff_percent": None,
        "reentry_min_remaining_percent": None,
    }
    assert connection_rows() == [("claude-max-1", "claude", "oauth", "", True, "none", "")]


def test_put_connection_replaces_the_fields_of_an_existing_one(gateway: str) -> None:
    make_connection("claude-max-1", label="old")

    response = api(
        "put",
        "/api/v1/connections/claude-max-1",
        gateway,
        {
            "provider": "claude",
            "auth_type": "oauth",
            "label": "Team Max plan",
            "active": False,
            "quota_source": "claude",
        },
    )

    assert response.status_code == 200
    assert response.json() == {
        "connection_id": "claude-max-1",
        "provider": "claude",
        "registered_provider": "claude",
        "auth_type": "oauth",
        "label": "Team Max plan",
        "active": False,
        "quota_source": "claude",
        "has_credential": False,
        "exit_cutoff_percent": None,
        "reentry_min_remaining_percent": None,
    }
    assert connection_rows() == [
        ("claude-max-1", "claude", "oauth", "Team Max plan", False, "claude", "")
    ]


@pytest.mark.parametrize(
    ("field", "value", "error_type"),
    [
        pytest.param("active", "yes", "bool_type", id="active-string"),
        pytest.param("active", 0, "bool_type", id="active-zero"),
        pytest.param("active", None, "bool_type", id="active-null"),
        pytest.param("quota_source", "carrier-pigeon", "literal_error", id="unknown-quota-source"),
        pytest.param("auth_type", "o\x00auth", "string_pattern_mismatch", id="nul-in-auth-type"),
        pytest.param("auth_type", "", "string_too_short", id="empty-auth-type"),
        pytest.param("provider", 7, "string_type", id="numeric-provider"),
        pytest.param("label", "x" * 201, "string_too_long", id="long-label"),
        pytest.param("colour", "red", "extra_forbidden", id="unknown-field"),
    ],
)
def test_put_connection_refuses_an_invalid_body_and_changes_nothing(
    gateway: str, field: str, value: Any, error_type: str
) -> None:
    make_connection("claude-max-1", label="kept")
    before = connection_rows()

    response = api(
        "put",
        "/api/v1/connections/claude-max-1",
        gateway,
        {"provider": "claude", "auth_type": "oauth", field: value},
    )

    assert response.status_code == 422
    assert [(e["loc"], e["type"]) for e in response.json()["detail"]] == [
        (["body", "payload", field], error_type)
    ]
    assert connection_rows() == before


def test_put_connection_without_an_auth_type_is_422(gateway: str) -> None:
    response = api("put", "/api/v1/connections/c1", gateway, {"provider": "claude"})

    assert response.status_code == 422
    assert response.json() == {
        "detail": [
            {"type": "missing", "loc": ["body", "payload", "auth_type"], "msg": "Field required"}
        ]
    }
    assert connection_rows() == []


def test_put_connection_with_malformed_json_is_400_and_stores_nothing(gateway: str) -> None:
    response = api("put", "/api/v1/connections/c1", gateway, raw="{'provider': 'claude'}")

    assert response.status_code == 400
    assert response.json() == {"detail": "Cannot parse request body"}
    assert connection_rows() == []


@pytest.mark.parametrize(
    "path_id",
    [
        pytest.param("a%20b", id="space"),
        pytest.param("a" * 200, id="200-chars"),
        pytest.param("a%00b", id="nul"),
        pytest.param("%C3%A9t%C3%A9", id="non-ascii"),
        pytest.param("a%3Bdrop", id="semicolon"),
    ],
)
def test_put_connection_with_a_hostile_id_is_422_and_stores_nothing(
    gateway: str, path_id: str
) -> None:
    response = api(
        "put",
        f"/api/v1/connections/{path_id}",
        gateway,
        {"provider": "claude", "auth_type": "oauth"},
    )

    assert response.status_code == 422
    assert [(e["loc"], e["type"]) for e in response.json()["detail"]] == [
        (["path", "connection_id"], "string_pattern_mismatch")
    ]
    assert connection_rows() == []


def test_put_connection_with_a_slash_in_the_id_is_404_and_stores_nothing(gateway: str) -> None:
    response = api(
        "put", "/api/v1/connections/a%2Fb", gateway, {"provider": "claude", "auth_type": "oauth"}
    )

    assert response.status_code == 404
    assert connection_rows() == []


def test_put_connection_accepts_every_allowed_id_character(gateway: str) -> None:
    connection_id = "Az09._:@-" + "x" * 119

    response = api(
        "put",
        f"/api/v1/connections/{connection_id}",
        gateway,
        {"provider": "claude", "auth_type": "oauth"},
    )

    assert response.status_code == 200
    assert response.json()["connection_id"] == connection_id
    assert Connection.objects.get().connection_id == connection_id


# --- credentials ----------------------------------------------------------------------------


def test_put_connection_with_a_credential_never_returns_it(gateway: str) -> None:
    response = api(
        "put",
        "/api/v1/connections/claude-max-1",
        gateway,
        {"provider": "claude", "auth_type": "oauth", "credential": SECRET},
    )

    assert response.status_code == 200
    assert response.json()["has_credential"] is True
    assert "credential" not in response.json()
    assert SECRET.encode() not in response.content


def test_a_stored_credential_appears_in_no_read_response(gateway: str) -> None:
    api(
        "put",
        "/api/v1/connections/claude-max-1",
        gateway,
        {"provider": "claude", "auth_type": "oauth", "credential": SECRET},
    )

    bodies = [
        api("get", "/api/v1/connections", gateway),
        api("get", "/api/v1/connections/claude-max-1", gateway),
        api("get", "/api/v1/connections/claude-max-1/status", gateway),
    ]

    assert [b.status_code for b in bodies] == [200, 200, 200]
    assert [SECRET.encode() in b.content for b in bodies] == [False, False, False]
    assert [b"credential_ciphertext" in b.content for b in bodies] == [False, False, False]
    assert bodies[0].json()[0]["has_credential"] is True
    assert bodies[1].json()["has_credential"] is True


def test_a_stored_credential_is_encrypted_at_rest(gateway: str) -> None:
    api(
        "put",
        "/api/v1/connections/claude-max-1",
        gateway,
        {"provider": "claude", "auth_type": "oauth", "credential": SECRET},
    )

    stored = Connection.objects.get().credential_ciphertext
    assert stored != SECRET
    assert SECRET not in stored
    assert stored.startswith("t1:")
    assert decrypt_credential(stored) == SECRET


def test_put_connection_without_a_credential_keeps_the_stored_one(gateway: str) -> None:
    make_connection("claude-max-1", credential=SECRET)
    stored = Connection.objects.get().credential_ciphertext

    response = api(
        "put",
        "/api/v1/connections/claude-max-1",
        gateway,
        {"provider": "claude", "auth_type": "oauth", "label": "renamed"},
    )

    assert response.json()["has_credential"] is True
    assert Connection.objects.get().credential_ciphertext == stored


def test_put_connection_with_an_empty_credential_clears_it(gateway: str) -> None:
    make_connection("claude-max-1", credential=SECRET)

    response = api(
        "put",
        "/api/v1/connections/claude-max-1",
        gateway,
        {"provider": "claude", "auth_type": "oauth", "credential": ""},
    )

    assert response.json()["has_credential"] is False
    assert Connection.objects.get().credential_ciphertext == ""


def test_a_refused_credential_is_not_echoed_in_the_error(gateway: str) -> None:
    response = api(
        "put",
        "/api/v1/connections/claude-max-1",
        gateway,
        {"provider": "claude", "auth_type": "oauth", "credential": SECRET + "\x00"},
    )

    assert response.status_code == 422
    assert [(e["loc"], e["type"]) for e in response.json()["detail"]] == [
        (["body", "payload", "credential"], "string_pattern_mismatch")
    ]
    assert SECRET.encode() not in response.content
    assert connection_rows() == []


def test_a_credential_is_never_logged(gateway: str, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)

    api(
        "put",
        "/api/v1/connections/claude-max-1",
        gateway,
        {"provider": "claude", "auth_type": "oauth", "credential": SECRET},
    )
    api(
        "put",
        "/api/v1/connections/claude-max-1",
        gateway,
        {"provider": "claude", "auth_type": "oauth", "credential": SECRET, "colour": "red"},
    )

    assert caplog.records
    assert SECRET not in caplog.text


def test_put_connection_with_a_credential_but_no_key_is_422_and_stores_nothing(
    gateway: str, settings: Any
) -> None:
    settings.OMNIROUTE_CREDENTIAL_KEY = ""

    response = api(
        "put",
        "/api/v1/connections/claude-max-1",
        gateway,
        {"provider": "claude", "auth_type": "oauth", "credential": SECRET},
    )

    assert response.status_code == 422
    assert response.json() == {
        "detail": [
            {
                "loc": ["body", "payload", "credential"],
                "msg": "OMNIROUTE_CREDENTIAL_KEY is not set: credentials cannot be stored or read.",
                "type": "value_error",
            }
        ]
    }
    assert SECRET.encode() not in response.content
    assert connection_rows() == []


# --- reads and delete --------------------------------------------------------------------------


def test_list_connections_returns_each_ordered_by_id(gateway: str) -> None:
    make_connection("z-key", provider="openai", auth_type="apikey", label="API key")
    make_connection("claude-max-1", quota_source="claude")

    response = api("get", "/api/v1/connections", gateway)

    assert response.status_code == 200
    assert response.json() == [
        {
            "connection_id": "claude-max-1",
            "provider": "claude",
            "registered_provider": "claude",
            "auth_type": "oauth",
            "label": "",
            "active": True,
            "quota_source": "claude",
            "has_credential": False,
            "exit_cutoff_percent": None,
            "reentry_min_remaining_percent": None,
        },
        {
            "connection_id": "z-key",
            "provider": "openai",
            "registered_provider": "openai",
            "auth_type": "apikey",
            "label": "API key",
            "active": True,
            "quota_source": "none",
            "has_credential": False,
            "exit_cutoff_percent": None,
            "reentry_min_remaining_percent": None,
        },
    ]


def test_get_connection_returns_it(gateway: str) -> None:
    make_connection("free-1", provider="pollinations", auth_type="none", active=False)

    response = api("get", "/api/v1/connections/free-1", gateway)

    assert response.status_code == 200
    assert response.json() == {
        "connection_id": "free-1",
        "provider": "pollinations",
        "registered_provider": "pollinations",
        "auth_type": "none",
        "label": "",
        "active": False,
        "quota_source": "none",
        "has_credential": False,
        "exit_cutoff_percent": None,
        "reentry_min_remaining_percent": None,
    }


def test_get_unknown_connection_is_404(gateway: str) -> None:
    response = api("get", "/api/v1/connections/nobody", gateway)

    assert response.status_code == 404
    assert response.json() == {"detail": "No connection 'nobody'."}


@pytest.mark.parametrize(
    ("method", "suffix"),
    [
        pytest.param("get", "", id="get"),
        pytest.param("delete", "", id="delete"),
        pytest.param("get", "/status", id="status"),
        pytest.param("post", "/refresh", id="refresh"),
    ],
)
def test_a_hostile_connection_id_is_refused_without_a_lookup(
    gateway: str, method: str, suffix: str, django_assert_max_num_queries: Any
) -> None:
    # Only the token lookup and its last-used stamp touch the database.
    with django_assert_max_num_queries(2):
        response = api(method, f"/api/v1/connections/a%20b{suffix}", gateway)

    assert response.status_code == 422
    assert [(e["loc"], e["type"]) for e in response.json()["detail"]] == [
        (["path", "connection_id"], "string_pattern_mismatch")
    ]


def test_delete_connection_answers_204_and_removes_its_readings(gateway: str) -> None:
    make_connection("claude-max-1")
    make_reading("claude-max-1", remaining_percent=40.0)

    response = api("delete", "/api/v1/connections/claude-max-1", gateway)

    assert response.status_code == 204
    assert response.content == b""
    assert not Connection.objects.exists()
    assert not QuotaReading.objects.exists()


def test_delete_unknown_connection_is_404(gateway: str) -> None:
    response = api("delete", "/api/v1/connections/nobody", gateway)

    assert response.status_code == 404
    assert response.json() == {"detail": "No connection 'nobody'."}


# --- status ----------------------------------------------------------------------------------


def reading_json(reading: QuotaReading) -> dict[str, Any]:
    return {
        "status": reading.status,
        "remaining_percent": reading.remaining_percent,
        "reset_at": iso(reading.reset_at),
        "checked_at": iso(reading.checked_at),
        "windows": reading.windows,
        "source": reading.source,
        "detail": reading.detail,
    }


def test_status_of_a_plan_connection_shows_verdict_rung_reading_and_state(gateway: str) -> None:
    now = timezone.now()
    make_connection("claude-max-1", quota_source="claude")
    stored = make_reading(
        "claude-max-1",
        now=now,
        checked_at=now - timedelta(seconds=10),
        remaining_percent=41.5,
        reset_at=now + timedelta(hours=2),
    )
    entry = claude_entry()
    row = Connection.objects.get()

    response = api("get", "/api/v1/connections/claude-max-1/status", gateway)

    assert response.status_code == 200
    assert response.json() == {
        "connection_id": "claude-max-1",
        "provider": "claude",
        "auth_type": "oauth",
        "active": True,
        "billing": {
            "billing": "subscription",
            "overage": "hard-stop",
            "reason": entry.reason,
            "catalog_entry_id": entry.pk,
            "effective_overage": "hard-stop",
            "evidence": None,
        },
        "rung": "subscription",
        "reading": reading_json(stored.reading),
        "reading_current": True,
        "hysteresis": {
            "state": "in_play",
            "since": iso(row.hysteresis_since),
            "reason": row.hysteresis_reason,
        },
        "scoped": [],
        "forecast": {
            "runs_out_at": None,
            "before_reset": None,
            "paid_until_reset_usd": None,
            "basis": "1 reading in this window, 3 needed for a forecast",
            "reset_at": iso(stored.reading.reset_at),
            "paid_by_rung": {},
            "sentence": "No forecast for claude-max-1: 1 reading in this window, 3 needed "
            "for a forecast.",
            "scopes": [],
        },
        "cooldown_until": None,
        "consecutive_failures": 0,
        "quota_error": "",
    }


def test_status_of_an_uncurated_connection_has_no_rung_and_no_reading(gateway: str) -> None:
    make_connection("acme-key", provider="acme", auth_type="apikey")

    response = api("get", "/api/v1/connections/acme-key/status", gateway)

    assert response.status_code == 200
    assert response.json() == {
        "connection_id": "acme-key",
        "provider": "acme",
        "auth_type": "apikey",
        "active": True,
        "billing": {
            "billing": "unknown",
            "overage": "unknown",
            "reason": UNCURATED_VERDICT.reason,
            "catalog_entry_id": None,
            "effective_overage": "unknown",
            "evidence": None,
        },
        "rung": None,
        "reading": None,
        "reading_current": False,
        "hysteresis": {"state": "in_play", "since": None, "reason": "never read"},
        "scoped": [],
        "forecast": None,
        "cooldown_until": None,
        "consecutive_failures": 0,
        "quota_error": "",
    }


def test_status_of_the_no_auth_path_is_keyless(gateway: str) -> None:
    make_connection("free-1", provider="claude", auth_type="none")

    response = api("get", "/api/v1/connections/free-1/status", gateway)

    assert response.json()["billing"] == {
        "billing": "keyless",
        "overage": "hard-stop",
        "reason": KEYLESS_VERDICT.reason,
        "catalog_entry_id": None,
        "effective_overage": "hard-stop",
        "evidence": None,
    }
    assert response.json()["rung"] == "keyless"


def test_status_shows_a_dropped_out_connection_with_since_and_why(gateway: str) -> None:
    now = timezone.now()
    checked_at = now - timedelta(seconds=5)
    make_connection("claude-max-1")
    make_reading("claude-max-1", now=now, checked_at=checked_at, remaining_percent=1.0)

    response = api("get", "/api/v1/connections/claude-max-1/status", gateway)

    assert response.json()["hysteresis"] == {
        "state": "dropped_out",
        "since": iso(checked_at),
        "reason": "1.0 % left, at or below the exit cutoff of 2 %",
    }


def test_status_shows_a_stale_reading_as_not_current(gateway: str) -> None:
    now = timezone.now()
    make_connection("claude-max-1")
    make_reading(
        "claude-max-1", now=now, checked_at=now - timedelta(hours=1), remaining_percent=80.0
    )

    response = api("get", "/api/v1/connections/claude-max-1/status", gateway)

    assert response.json()["reading_current"] is False
    assert response.json()["reading"]["remaining_percent"] == 80.0


def test_status_shows_the_cooldown_in_force_and_the_failure_count(gateway: str) -> None:
    make_connection("claude-max-1")
    event = api(
        "post",
        "/api/v1/connections/claude-max-1/events",
        gateway,
        {"kind": "rate_limited", "retry_after_seconds": 600},
    )

    response = api("get", "/api/v1/connections/claude-max-1/status", gateway)

    assert response.json()["cooldown_until"] == event.json()["cooldown_until"]
    assert response.json()["consecutive_failures"] == 1


def test_status_hides_a_cooldown_that_has_ended(gateway: str) -> None:
    make_connection("claude-max-1")
    Connection.objects.update(
        cooldown_until=timezone.now() - timedelta(minutes=1), consecutive_failures=3
    )

    response = api("get", "/api/v1/connections/claude-max-1/status", gateway)

    assert response.json()["cooldown_until"] is None
    assert response.json()["consecutive_failures"] == 3


def test_status_of_an_unknown_connection_is_404(gateway: str) -> None:
    response = api("get", "/api/v1/connections/nobody/status", gateway)

    assert response.status_code == 404
    assert response.json() == {"detail": "No connection 'nobody'."}


# --- refresh ----------------------------------------------------------------------------------


class Recorder:
    """Stands in for the broker boundary: records each publish (or fails like a dead one)."""

    def __init__(self, error: Exception | None = None) -> None:
        self.calls: list[dict[str, Any]] = []
        self.error = error

    def __call__(self, *args: Any, **kwargs: Any) -> None:
        self.calls.append({"args": args, **kwargs})
        if self.error is not None:
            raise self.error


@pytest.fixture
def publish(monkeypatch: pytest.MonkeyPatch) -> Recorder:
    recorder = Recorder()
    monkeypatch.setattr(enqueue, "send_refresh", recorder)
    return recorder


def test_refresh_answers_202_and_publishes_one_poll_of_that_connection(
    gateway: str, publish: Recorder
) -> None:
    make_connection("claude-max-1", quota_source="claude")
    before = timezone.now()

    response = api("post", "/api/v1/connections/claude-max-1/refresh", gateway)

    after = timezone.now()
    assert response.status_code == 202
    assert response.json() == {"queued": True}
    assert len(publish.calls) == 1
    kwargs = publish.calls[0]["kwargs"]
    assert publish.calls[0]["args"] == ()
    assert set(kwargs) == {"connection_id", "requested_at"}
    assert kwargs["connection_id"] == "claude-max-1"
    assert before <= datetime.fromisoformat(kwargs["requested_at"]) <= after


def test_refresh_of_a_connection_without_a_quota_source_is_409(
    gateway: str, publish: Recorder
) -> None:
    make_connection("openai-key", provider="openai", auth_type="apikey")

    response = api("post", "/api/v1/connections/openai-key/refresh", gateway)

    assert response.status_code == 409
    assert response.json() == {
        "detail": "Connection 'openai-key' has no quota source: set quota_source to poll it, "
        "or push readings to /readings."
    }
    assert publish.calls == []


def test_refresh_of_an_unknown_connection_is_404(gateway: str, publish: Recorder) -> None:
    response = api("post", "/api/v1/connections/nobody/refresh", gateway)

    assert response.status_code == 404
    assert response.json() == {"detail": "No connection 'nobody'."}
    assert publish.calls == []


def test_refresh_with_the_broker_down_is_503_json(
    gateway: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    make_connection("claude-max-1", quota_source="claude")
    monkeypatch.setattr(
        enqueue,
        "send_refresh",
        Recorder(error=ConnectionRefusedError("broker down")),
    )

    response = api("post", "/api/v1/connections/claude-max-1/refresh", gateway)

    assert response.status_code == 503
    assert response.json() == {"detail": "The task broker is unavailable; nothing was queued."}


# --- the ids `.` and `..` ----------------------------------------------------------------

DOT_IDS = [
    pytest.param(".", id="dot"),
    pytest.param("..", id="dot-dot"),
    pytest.param("%2E", id="dot-encoded"),
    pytest.param("%2E%2E", id="dot-dot-encoded"),
]
CONNECTION_PATHS = [
    pytest.param("put", "", {"provider": "claude", "auth_type": "oauth"}, id="put"),
    pytest.param("get", "", None, id="get"),
    pytest.param("delete", "", None, id="delete"),
    pytest.param("get", "/status", None, id="status"),
    pytest.param("post", "/refresh", None, id="refresh"),
    pytest.param(
        "post",
        "/readings",
        {"status": "SAFE", "remaining_percent": 50.0, "checked_at": "2026-11-29T12:00:00Z"},
        id="readings",
    ),
    pytest.param("post", "/events", {"kind": "quota_exhausted"}, id="events"),
]


@pytest.mark.parametrize(("method", "suffix", "body"), CONNECTION_PATHS)
@pytest.mark.parametrize("path_id", DOT_IDS)
def test_the_ids_dot_and_dot_dot_are_refused_on_every_connection_path_without_a_lookup(
    gateway: str,
    path_id: str,
    method: str,
    suffix: str,
    body: Any,
    django_assert_max_num_queries: Any,
) -> None:
    # Only the token lookup and its last-used stamp touch the database.
    with django_assert_max_num_queries(2):
        response = api(method, f"/api/v1/connections/{path_id}{suffix}", gateway, body)

    assert response.status_code == 422
    assert [(e["loc"], e["type"]) for e in response.json()["detail"]] == [
        (["path", "connection_id"], "string_pattern_mismatch")
    ]
    assert connection_rows() == []
    assert not QuotaReading.objects.exists()


@pytest.mark.parametrize("connection_id", ["...", ".a", "..a", "a.", "a..b", "-", "@"])
def test_ids_with_dots_that_are_not_dot_or_dot_dot_are_still_accepted(
    gateway: str, connection_id: str
) -> None:
    response = api(
        "put",
        f"/api/v1/connections/{connection_id}",
        gateway,
        {"provider": "claude", "auth_type": "oauth"},
    )

    assert response.status_code == 200
    assert response.json()["connection_id"] == connection_id
    assert api("get", f"/api/v1/connections/{connection_id}", gateway).status_code == 200


@pytest.mark.parametrize("bad", [".", ".."])
@pytest.mark.parametrize(
    "target",
    [
        pytest.param(lambda bad: {"connection_id": bad}, id="pinned"),
        pytest.param(lambda bad: {"allowed_connection_ids": ["claude-max-1", bad]}, id="allowlist"),
    ],
)
def test_candidates_refuse_the_ids_dot_and_dot_dot(gateway: str, bad: str, target: Any) -> None:
    from ladder.models import Candidate

    body = {"provider": "claude", "model": "claude-sonnet-4-5", **target(bad)}

    response = api("post", "/api/v1/candidates", gateway, body)

    assert response.status_code == 422
    assert {e["type"] for e in response.json()["detail"]} == {"string_pattern_mismatch"}
    assert not Candidate.objects.exists()


@pytest.mark.parametrize("bad", [".", ".."])
@pytest.mark.parametrize(
    "target",
    [
        pytest.param(lambda bad: {"connection_id": bad}, id="pinned"),
        pytest.param(lambda bad: {"allowed_connection_ids": ["claude-max-1", bad]}, id="allowlist"),
    ],
)
def test_pool_posts_refuse_the_ids_dot_and_dot_dot(gateway: str, bad: str, target: Any) -> None:
    candidate = {"id": 1, "provider": "claude", "model": "claude-sonnet-4-5", **target(bad)}

    response = api("post", "/api/v1/pools/auto/thrifty", gateway, {"candidates": [candidate]})

    assert response.status_code == 422
    assert {e["type"] for e in response.json()["detail"]} == {"string_pattern_mismatch"}


@pytest.mark.parametrize("bad", [".", ".."])
def test_spend_refuses_the_ids_dot_and_dot_dot(gateway: str, bad: str) -> None:
    from ladder.models import SpendEntry

    body = {
        "request_id": "req-1",
        "connection_id": bad,
        "provider": "openai",
        "model": "gpt-4o-mini",
        "cost_usd": 0.25,
    }

    response = api("post", "/api/v1/spend", gateway, body)

    assert response.status_code == 422
    assert [(e["loc"], e["type"]) for e in response.json()["detail"]] == [
        (["body", "payload", "connection_id"], "string_pattern_mismatch")
    ]
    assert not SpendEntry.objects.exists()


@pytest.mark.parametrize("bad", [".", "..", "a b", ""])
def test_the_services_refuse_a_bad_connection_id_before_any_query(
    bad: str, django_assert_num_queries: Any
) -> None:
    from django.core.exceptions import ValidationError

    from ladder import services

    with django_assert_num_queries(0):
        with pytest.raises(ValidationError):
            services.upsert_connection(bad, services.ConnectionInput("claude", "oauth"))
        for lookup in (
            lambda: services.get_connection(bad),
            lambda: services.request_refresh(bad),
            lambda: services.store_reading(bad, services.ReadingInput(remaining_percent=50.0)),
            lambda: services.apply_event(bad, kind="rate_limited"),
        ):
            with pytest.raises(services.NotFound):
                lookup()
        assert services.delete_connection(bad) is False
        with pytest.raises(ValidationError):
            services.save_candidate(services.CandidateInput("claude", "m", connection_id=bad))
        with pytest.raises(ValidationError):
            services.save_candidate(
                services.CandidateInput("claude", "m", allowed_connection_ids=("ok", bad))
            )
        with pytest.raises(ValidationError):
            services.record_spend(
                services.SpendInput("req-1", bad, "openai", "gpt-4o-mini", cost_usd=None)
            )


def test_put_connection_stores_its_own_reserve(gateway: str) -> None:
    body = {
        "provider": "claude",
        "auth_type": "oauth",
        "exit_cutoff_percent": 30,
        "reentry_min_remaining_percent": 40.5,
    }

    response = api("put", "/api/v1/connections/claude-max-1", gateway, body)

    assert response.status_code == 200
    assert (
        response.json()["exit_cutoff_percent"],
        response.json()["reentry_min_remaining_percent"],
    ) == (30.0, 40.5)


def test_put_connection_with_a_floor_below_its_cutoff_is_422_naming_both(gateway: str) -> None:
    make_connection("claude-max-1", label="kept")
    before = connection_rows()
    body = {
        "provider": "claude",
        "auth_type": "oauth",
        "exit_cutoff_percent": 30,
        "reentry_min_remaining_percent": 10,
    }

    response = api("put", "/api/v1/connections/claude-max-1", gateway, body)

    assert response.status_code == 422
    named = {tuple(e["loc"]) for e in response.json()["detail"]}
    assert named == {
        ("body", "payload", "exit_cutoff_percent"),
        ("body", "payload", "reentry_min_remaining_percent"),
    }
    assert connection_rows() == before


def test_status_shows_effective_overage_evidence_and_scopes(gateway: str) -> None:
    make_connection("claude-max-1")
    services.store_reading(
        "claude-max-1",
        services.ReadingInput(
            windows=(
                WindowReading("seven_day", 40.0, None),
                WindowReading("seven_day_opus", 0.0, None, "opus"),
            ),
            evidence=services.pushed_evidence("can_meter"),
        ),
    )

    body = api("get", "/api/v1/connections/claude-max-1/status", gateway).json()

    assert (body["billing"]["overage"], body["billing"]["effective_overage"]) == (
        "hard-stop",
        "meters-to-paid",
    )
    evidence = body["billing"]["evidence"]
    assert (evidence["says"], evidence["source"], evidence["detail"]) == (
        "can_meter",
        "push",
        "the gateway pushed overage_evidence: can_meter",
    )
    [scoped] = body["scoped"]
    assert (scoped["model_scope"], scoped["remaining_percent"], scoped["reset_at"]) == (
        "opus",
        0.0,
        None,
    )
    assert scoped["hysteresis"]["state"] == "dropped_out"
    assert body["reading"]["remaining_percent"] == 40.0
