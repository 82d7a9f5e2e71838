"""Fixtures for the quota tests: a real fake upstream and production-built clients."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from ladder.quota.http import make_client

from .fake_upstream import FakeUpstream


@pytest.fixture(autouse=True)
def _credential_key() -> None:
    """Override the suite-wide autouse fixture of the same name, which needs Django.

    These tests import no Django and run with ``-p no:django``, where pytest-django's
    ``settings`` fixture does not exist; nothing here reads the credential key.
    """


@pytest.fixture
def upstream() -> Iterator[FakeUpstream]:
    """A running fake upstream; released and shut down after the test."""
    server = FakeUpstream()
    server.start()
    yield server
    server.stop()


@pytest.fixture
def client() -> Iterator[httpx.Client]:
    """The production client with a generous timeout."""
    with make_client(timeout_seconds=5.0) as http_client:
        yield http_client


@pytest.fixture
def impatient_client() -> Iterator[httpx.Client]:
    """The production client with a tiny timeout, for the timeout tests."""
    with make_client(timeout_seconds=0.2) as http_client:
        yield http_client
