"""Suite-wide fixtures."""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from typing import Any

import pytest
from cryptography.fernet import Fernet

TEST_CREDENTIAL_KEY = "t1:" + Fernet.generate_key().decode()


@pytest.fixture(scope="session")
def django_db_modify_db_settings(django_db_modify_db_settings_parallel_suffix: None) -> None:
    """On PostgreSQL the suite's own connections get a 60 s statement timeout, not the
    2 s production default: on a loaded machine (load average 12 on 2 cores) creating or
    dropping a test database took longer than 2 s, the drop was cancelled and the next run
    could not create its database. Servers the tests start read their own settings."""
    from django.conf import settings

    options = settings.DATABASES["default"].get("OPTIONS", {})
    if "statement_timeout=" in options.get("options", ""):
        options["options"] = re.sub(
            r"statement_timeout=\d+", "statement_timeout=60000", options["options"]
        )


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


@pytest.fixture
def restored_script_prefix() -> Iterator[None]:
    """For a test that mounts the app under a path prefix: Django's WSGI handler keeps
    each request's SCRIPT_NAME as the thread's script prefix, so after a request under
    `/omr` every `reverse()` on this thread would start with `/omr` until another request
    through the handler. The prefix the test found is put back when it ends."""
    from django.urls import get_script_prefix, set_script_prefix

    before = get_script_prefix()
    try:
        yield
    finally:
        set_script_prefix(before)


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


# --- A Redis broker is left as the suite found it ---------------------------------------
# Tests on a Redis broker leave kombu's bindings, queues and unacked tables behind. The
# controlling process (the only one with xdist, or the single one without) notes the
# keys there before the run and deletes those the run added once every test is done.
_REDIS_KEYS = pytest.StashKey[set[bytes]]()


def _redis_broker() -> Any:
    """A client of the suite's Redis broker, or None on another broker."""
    url = os.environ.get("CELERY_BROKER_URL", "")
    if not url.startswith("redis://"):
        return None
    import redis

    return redis.Redis.from_url(url)


def pytest_sessionstart(session: pytest.Session) -> None:
    client = _redis_broker()
    if client is not None and not hasattr(session.config, "workerinput"):
        session.config.stash[_REDIS_KEYS] = set(client.scan_iter(count=1000))


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    client = _redis_broker()
    before = session.config.stash.get(_REDIS_KEYS, None)
    if client is None or before is None:
        return
    added = [key for key in client.scan_iter(count=1000) if key not in before]
    if added:
        client.delete(*added)
