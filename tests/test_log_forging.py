"""No logged value can forge a log line: CR, LF, other C0/C1 controls and the Unicode line
separators in a provider, an auth type, a request path or a header value are escaped by
the handlers the project configures (Django's LOGGING, Celery's, gunicorn's), checked in
the text those handlers really write."""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Iterator
from datetime import timedelta
from io import StringIO
from types import SimpleNamespace
from typing import Any

import pytest
from django.test import Client

from omniroute_admin.log_escape import CONTINUATION, EscapingFormatter, escape_controls
from tests.ladder.factories import make_token

HOSTILE = "x\r\n2026-12-01 10:00:00,000 INFO forged\u2028two\u2029three\x85four\x1b[31m\x00end"
ESCAPED = (
    "x\\r\\n2026-12-01 10:00:00,000 INFO forged\\u2028two\\u2029three\\x85four\\x1b[31m\\x00end"
)
# Short enough for a provider (64 characters).
SHORT = "\r\nINFO forged\u2028x\x1b"
SHORT_ESCAPED = "\\r\\nINFO forged\\u2028x\\x1b"
RECORD_START = re.compile(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} [A-Z]+ \S+ ")
# Everything str.splitlines() breaks on, and every other control character.
RAW_CONTROL = re.compile("[\x00-\x09\x0b-\x1f\x7f-\x9f\u2028\u2029]")


@pytest.fixture
def written() -> Iterator[StringIO]:
    """What the handler settings.LOGGING installs on the root logger writes."""
    # settings.LOGGING's console handler (pytest's own handlers are subclasses).
    (handler,) = [h for h in logging.getLogger().handlers if type(h) is logging.StreamHandler]
    stream = StringIO()
    previous = handler.setStream(stream)
    yield stream
    handler.setStream(previous)


def assert_unforgeable(text: str) -> list[str]:
    """Every line is a record's first line or a marked continuation; no raw control."""
    lines = text.splitlines()
    assert lines, "nothing was logged"
    for line in lines:
        assert RAW_CONTROL.search(line) is None, line
        assert RECORD_START.match(line) or line.startswith(CONTINUATION), line
    assert "\r" not in text
    return lines


def test_settings_logging_formats_every_record_through_the_escaping_formatter() -> None:
    (handler,) = [h for h in logging.getLogger().handlers if type(h) is logging.StreamHandler]

    assert isinstance(handler.formatter, EscapingFormatter)


def lines_with(text: str, needle: str) -> list[str]:
    return [line for line in text.split("\n") if needle in line]


@pytest.mark.django_db
def test_a_hostile_provider_and_auth_type_cannot_forge_a_log_line(written: StringIO) -> None:
    response = Client().put(
        "/api/v1/connections/hostile",
        json.dumps({"provider": "claude" + SHORT, "auth_type": "oauth" + SHORT}),
        content_type="application/json",
        HTTP_AUTHORIZATION=f"Bearer {make_token()}",
    )

    assert response.status_code == 200, response.content
    text = written.getvalue()
    assert_unforgeable(text)
    (line,) = lines_with(text, "connection hostile created")
    # Provider ids and auth types are stored lower-cased (docs/GATEWAYS.md).
    assert line.endswith(
        f"INFO ladder.services connection hostile created (provider claude"
        f"{SHORT_ESCAPED.lower()}, auth oauth{SHORT_ESCAPED.lower()}, credential kept)"
    )


@pytest.mark.django_db
@pytest.mark.parametrize("prefix", ["/nothing", "/api/v1/nothing"])
def test_a_404_path_with_cr_lf_is_logged_on_one_line(written: StringIO, prefix: str) -> None:
    response = Client().get(prefix + "%0d%0a2026-12-01%2010:00:00,000%20INFO%20forged%E2%80%A8x")

    assert response.status_code == 404
    text = written.getvalue()
    assert_unforgeable(text)
    (line,) = lines_with(text, "Not Found")
    assert line.endswith(
        f"WARNING django.request Not Found: {prefix}\\r\\n2026-12-01 10:00:00,000 INFO"
        " forged\\u2028x"
    )


@pytest.mark.django_db
def test_a_request_path_with_cr_lf_cannot_forge_the_apps_own_log_line(
    written: StringIO, monkeypatch: pytest.MonkeyPatch
) -> None:
    from django.db import OperationalError

    from ladder.api import pool_answers

    def database_gone(auto_id: str) -> Any:
        raise OperationalError("the database is gone")

    monkeypatch.setattr(pool_answers, "parse_pool_id", database_gone)
    token = make_token()

    response = Client().get(
        # No LF: the route's path converter stops at one (and a 404 is logged escaped by
        # Django itself); CR, U+2028 and NEL are enough to forge a line.
        "/api/v1/pools/auto/x%0d2026-12-01%2010:00:00,000%20INFO%20forged%E2%80%A8y%C2%85z",
        HTTP_AUTHORIZATION=f"Bearer {token}",
    )

    assert response.status_code == 503
    text = written.getvalue()
    assert_unforgeable(text)
    (line,) = lines_with(text, "database unavailable")
    assert line.endswith(
        "WARNING omniroute_admin.errors database unavailable during GET /api/v1/pools/auto/x"
        "\\r2026-12-01 10:00:00,000 INFO forged\\u2028y\\x85z: OperationalError"
    )


def test_a_traceback_keeps_its_lines_but_each_is_marked(written: StringIO) -> None:
    try:
        raise ValueError("bad value" + HOSTILE)
    except ValueError:
        logging.getLogger("ladder.tasks").exception("failed on %s", HOSTILE)

    lines = assert_unforgeable(written.getvalue())
    assert lines[0].endswith(f"ERROR ladder.tasks failed on {ESCAPED}")
    assert lines[1] == CONTINUATION + "Traceback (most recent call last):"
    # The exception's own line break stays a line break, and the line it starts is marked.
    assert lines[-2:] == [
        CONTINUATION + "ValueError: bad valuex\\r",
        CONTINUATION + ESCAPED.split("\\n", 1)[1],
    ]


def test_the_runserver_access_line_cannot_be_forged(written: StringIO) -> None:
    # django.server is configured by Django with a handler of its own; LOGGING clears it.
    assert logging.getLogger("django.server").handlers == []

    logging.getLogger("django.server").info('"%s" %s %s', f"GET /{HOSTILE} HTTP/1.1", 404, 0)

    (line,) = assert_unforgeable(written.getvalue())
    assert line.endswith(f'INFO django.server "GET /{ESCAPED} HTTP/1.1" 404 0')


def test_escape_controls_names_each_control_character() -> None:
    assert escape_controls("a\tb\x7fc\x9fd\u2028e\\nf") == "a\\tb\\x7fc\\x9fd\\u2028e\\nf"


def test_a_hostile_header_value_cannot_forge_a_gunicorn_access_line() -> None:
    from gunicorn.config import Config

    from omniroute_admin.gunicorn_logging import EscapingLogger

    config = Config()
    config.set("accesslog", "-")
    config.set("access_log_format", '%(h)s "%(r)s" %(s)s "%(f)s" "%(a)s" %({x-forwarded-for}i)s')
    logger = EscapingLogger(config)
    stream = StringIO()
    (handler,) = logger.access_log.handlers
    handler.setStream(stream)
    environ = {
        "REMOTE_ADDR": "127.0.0.1",
        "REQUEST_METHOD": "GET",
        "RAW_URI": "/x%0d%0a",
        "SERVER_PROTOCOL": "HTTP/1.1",
        "HTTP_REFERER": "https://r.example/" + HOSTILE,
        "HTTP_USER_AGENT": "agent" + HOSTILE,
    }
    request = SimpleNamespace(headers=[("X-FORWARDED-FOR", "10.0.0.1" + HOSTILE)])
    response = SimpleNamespace(status="404 Not Found", sent=0, headers=[])

    logger.access(response, request, environ, timedelta(milliseconds=3))

    text = stream.getvalue()
    assert text == (
        f'127.0.0.1 "GET /x%0d%0a HTTP/1.1" 404 "https://r.example/{ESCAPED}"'
        f' "agent{ESCAPED}" 10.0.0.1{ESCAPED}\n'
    )


def test_a_hostile_value_cannot_forge_a_celery_log_line() -> None:
    from celery.signals import after_setup_logger

    from omniroute_admin.celery import app

    logger = logging.getLogger("tests.celery-forging")
    logger.propagate = False
    stream = StringIO()
    # Celery's own handler and format, as `celery worker` sets them up, then its signal.
    app.log.setup_handlers(logger, stream, "[%(levelname)s/%(processName)s] %(message)s", False)
    after_setup_logger.send(sender=None, logger=logger, loglevel=logging.INFO)
    try:
        logger.warning("refresh %s: %s", HOSTILE, "polled")
    finally:
        for handler in list(logger.handlers):
            logger.removeHandler(handler)

    assert stream.getvalue() == f"[WARNING/MainProcess] refresh {ESCAPED}: polled\n"


def test_other_handlers_still_see_the_record_as_it_was(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO)
    logging.getLogger("ladder").info("value %s", HOSTILE)

    (record,) = [r for r in caplog.records if r.name == "ladder"]
    assert record.getMessage() == f"value {HOSTILE}"  # escaping copies, never mutates
