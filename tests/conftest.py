"""Suite-wide fixtures."""

from __future__ import annotations

import pytest
from cryptography.fernet import Fernet

TEST_CREDENTIAL_KEY = "t1:" + Fernet.generate_key().decode()


@pytest.fixture(autouse=True)
def _credential_key(settings: pytest.FixtureRequest) -> None:
    """Every test has a credential key unless it removes it on purpose, and hashes test
    passwords quickly (the production hasher is deliberately slow)."""
    settings.OMNIROUTE_CREDENTIAL_KEY = TEST_CREDENTIAL_KEY  # type: ignore[attr-defined]
    settings.PASSWORD_HASHERS = [  # type: ignore[attr-defined]
        "django.contrib.auth.hashers.MD5PasswordHasher"
    ]
    # In-process tests call the app on the test's own thread and database connection; the
    # request deadlines (thread pools) are exercised by their own tests against a real
    # server.
    settings.API_REQUEST_DEADLINE_SECONDS = 0  # type: ignore[attr-defined]
    settings.DASHBOARD_REQUEST_DEADLINE_SECONDS = 0  # type: ignore[attr-defined]


@pytest.fixture(autouse=True)
def _fresh_decision_caches() -> None:
    """Each test starts with empty per-process caches: test databases roll back, and with
    them the change counters the caches are keyed by."""
    from ladder.services import clear_caches

    clear_caches()


@pytest.fixture(autouse=True)
def _fresh_process_start(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test runs as a freshly started process would: the beat's first-heartbeat
    grace (ladder/beat.py) starts with the test, so /readyz never depends on how long the
    suite has been running. Tests of the grace pin their own start."""
    from django.utils import timezone

    from ladder import beat

    monkeypatch.setattr(beat, "STARTED_AT", timezone.now())
