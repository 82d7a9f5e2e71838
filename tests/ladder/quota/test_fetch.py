"""Every adapter's fetch over real HTTP, against a fake upstream on 127.0.0.1."""

from __future__ import annotations

import json
import socket
from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest

from ladder.quota import get_adapter
from ladder.quota.base import QuotaError
from ladder.quota.http import MAX_BODY_BYTES, make_client

from .fake_upstream import FakeUpstream, Received
from .recorded import load, raw

CREDENTIALS = {
    "claude": "sk-ant-oat01-secret",
    "codex": "eyJ.codex.secret",
    "copilot": "gho_secret",
    "gemini-cli": '{"access_token": "ya29.secret", "project": "proj-1"}',
    "antigravity": "ya29.secret",
}
HTTP_ADAPTERS = list(CREDENTIALS)
SENT_HEADERS = ("accept", "authorization", "anthropic-beta", "chatgpt-account-id", "content-type")


def fetch(
    name: str, upstream: FakeUpstream, client: httpx.Client, credential: str | None = None
) -> Any:
    """Call the adapter's fetch against the fake upstream, on the real endpoint's path."""
    adapter = get_adapter(name)
    url = upstream.url(urlsplit(adapter.default_url).path)
    return adapter.fetch(url=url, credential=credential or CREDENTIALS[name], client=client)


def seen(request: Received) -> tuple[str, str, dict[str, str], Any]:
    """What matters of a received request: method, path, the auth headers, the JSON body."""
    headers = {name: request.headers[name] for name in SENT_HEADERS if name in request.headers}
    return request.method, request.path, headers, json.loads(request.body) if request.body else None


# --- what each fetch sends ----------------------------------------------------------------


def test_claude_fetch_sends_bearer_and_beta_header(
    upstream: FakeUpstream, client: httpx.Client
) -> None:
    upstream.respond(body=raw("claude"))

    payload = fetch("claude", upstream, client)

    assert payload == load("claude")
    assert [seen(request) for request in upstream.received] == [
        (
            "GET",
            "/api/oauth/usage",
            {
                "accept": "application/json",
                "authorization": "Bearer sk-ant-oat01-secret",
                "anthropic-beta": "oauth-2025-04-20",
            },
            None,
        )
    ]


def test_every_fetch_identifies_itself(upstream: FakeUpstream, client: httpx.Client) -> None:
    fetch("claude", upstream, client)

    assert upstream.received[0].headers["user-agent"] == "omniroute-admin-quota/1"


def test_codex_fetch_sends_bearer(upstream: FakeUpstream, client: httpx.Client) -> None:
    upstream.respond(body=raw("codex"))

    payload = fetch("codex", upstream, client)

    assert payload == load("codex")
    assert [seen(request) for request in upstream.received] == [
        (
            "GET",
            "/backend-api/wham/usage",
            {"accept": "application/json", "authorization": "Bearer eyJ.codex.secret"},
            None,
        )
    ]


def test_codex_fetch_sends_the_account_id_when_given(
    upstream: FakeUpstream, client: httpx.Client
) -> None:
    credential = '{"access_token": "eyJ.codex.secret", "account_id": "acct-42"}'

    fetch("codex", upstream, client, credential)

    assert seen(upstream.received[0])[2] == {
        "accept": "application/json",
        "authorization": "Bearer eyJ.codex.secret",
        "chatgpt-account-id": "acct-42",
    }


def test_copilot_fetch_uses_the_token_scheme(upstream: FakeUpstream, client: httpx.Client) -> None:
    upstream.respond(body=raw("copilot"))

    payload = fetch("copilot", upstream, client)

    assert payload == load("copilot")
    assert [seen(request) for request in upstream.received] == [
        (
            "GET",
            "/copilot_internal/user",
            {"accept": "application/json", "authorization": "token gho_secret"},
            None,
        )
    ]


def test_gemini_cli_fetch_posts_the_project(upstream: FakeUpstream, client: httpx.Client) -> None:
    upstream.respond(body=raw("gemini_cli"))

    payload = fetch("gemini-cli", upstream, client)

    assert payload == load("gemini_cli")
    assert [seen(request) for request in upstream.received] == [
        (
            "POST",
            "/v1internal:retrieveUserQuota",
            {
                "accept": "application/json",
                "authorization": "Bearer ya29.secret",
                "content-type": "application/json",
            },
            {"project": "proj-1"},
        )
    ]


def test_gemini_cli_bare_token_is_refused_before_sending(
    upstream: FakeUpstream, client: httpx.Client
) -> None:
    with pytest.raises(QuotaError) as caught:
        fetch("gemini-cli", upstream, client, "ya29.secret")

    assert (caught.value.kind, caught.value.message) == (
        "credential_invalid",
        "the gemini-cli credential must be a JSON object with access_token, project",
    )
    assert upstream.received == []


def test_antigravity_fetch_posts_an_empty_body(
    upstream: FakeUpstream, client: httpx.Client
) -> None:
    upstream.respond(body=raw("antigravity"))

    payload = fetch("antigravity", upstream, client)

    assert payload == load("antigravity")
    assert [seen(request) for request in upstream.received] == [
        (
            "POST",
            "/v1internal:fetchAvailableModels",
            {
                "accept": "application/json",
                "authorization": "Bearer ya29.secret",
                "content-type": "application/json",
            },
            {},
        )
    ]


def test_antigravity_fetch_posts_the_project_when_given(
    upstream: FakeUpstream, client: httpx.Client
) -> None:
    credential = '{"access_token": "ya29.secret", "project": "proj-9"}'

    fetch("antigravity", upstream, client, credential)

    assert seen(upstream.received[0])[3] == {"project": "proj-9"}


# --- how every fetch maps failures ------------------------------------------------------

FAILURES = [
    pytest.param(401, '{"error": "invalid_token"}', {}, "credential_rejected", None, id="401"),
    pytest.param(403, '{"error": "forbidden"}', {}, "credential_rejected", None, id="403"),
    pytest.param(429, "{}", {}, "rate_limited", None, id="429-without-retry-after"),
    pytest.param(429, "{}", {"Retry-After": "120"}, "rate_limited", 120.0, id="429-retry-seconds"),
    pytest.param(
        429,
        "{}",
        {"Retry-After": "Sun, 29 Nov 2026 12:01:30 GMT", "Date": "Sun, 29 Nov 2026 12:00:00 GMT"},
        "rate_limited",
        90.0,
        id="429-retry-http-date",
    ),
    pytest.param(500, "oops", {}, "upstream_error", None, id="500"),
    pytest.param(503, "busy", {"Retry-After": "30"}, "upstream_error", 30.0, id="503-retry"),
    pytest.param(404, "no", {}, "upstream_error", None, id="404"),
    pytest.param(
        200,
        "<html><body>Sign in</body></html>",
        {"Content-Type": "text/html"},
        "unparseable",
        None,
        id="html-body",
    ),
    pytest.param(200, raw("claude")[:40], {}, "unparseable", None, id="truncated-json"),
    pytest.param(204, "", {}, "unparseable", None, id="empty-body"),
    pytest.param(
        302,
        "",
        {"Location": "http://169.254.169.254/latest/meta-data/"},
        "redirect_refused",
        None,
        id="302-to-metadata",
    ),
]


@pytest.mark.parametrize(("status", "body", "headers", "kind", "retry_after"), FAILURES)
@pytest.mark.parametrize("name", HTTP_ADAPTERS)
def test_fetch_maps_failures_to_error_kinds(
    upstream: FakeUpstream,
    client: httpx.Client,
    name: str,
    status: int,
    body: str | bytes,
    headers: dict[str, str],
    kind: str,
    retry_after: float | None,
) -> None:
    upstream.respond(status=status, body=body, headers=headers)

    with pytest.raises(QuotaError) as caught:
        fetch(name, upstream, client)

    assert (caught.value.kind, caught.value.retry_after_seconds) == (kind, retry_after)
    assert len(upstream.received) == 1


@pytest.mark.parametrize("name", HTTP_ADAPTERS)
def test_fetch_timeout(upstream: FakeUpstream, impatient_client: httpx.Client, name: str) -> None:
    upstream.respond(is_held=True)

    with pytest.raises(QuotaError) as caught:
        fetch(name, upstream, impatient_client)

    assert (caught.value.kind, caught.value.message) == (
        "timeout",
        "127.0.0.1 did not answer in time",
    )


def test_redirect_is_refused_even_by_a_client_that_follows_redirects(
    upstream: FakeUpstream,
) -> None:
    upstream.respond(status=302, body="", headers={"Location": "http://169.254.169.254/"})

    with (
        httpx.Client(follow_redirects=True, timeout=2.0) as following_client,
        pytest.raises(QuotaError) as caught,
    ):
        fetch("claude", upstream, following_client)

    assert (caught.value.kind, caught.value.message) == (
        "redirect_refused",
        "127.0.0.1 answered HTTP 302 redirecting to 169.254.169.254; redirects are never followed",
    )
    assert len(upstream.received) == 1


def test_credential_rejected_message(upstream: FakeUpstream, client: httpx.Client) -> None:
    upstream.respond(status=401, body="{}")

    with pytest.raises(QuotaError) as caught:
        fetch("claude", upstream, client)

    assert str(caught.value) == "credential_rejected: 127.0.0.1 rejected the credential (HTTP 401)"


def test_upstream_error_quotes_the_body_with_the_credential_redacted(
    upstream: FakeUpstream, client: httpx.Client
) -> None:
    upstream.respond(status=500, body='{"error": "bad  token\\n sk-ant-oat01-secret"}')

    with pytest.raises(QuotaError) as caught:
        fetch("claude", upstream, client)

    assert caught.value.message == (
        '127.0.0.1 answered HTTP 500: {"error": "bad token\\n [redacted]"}'
    )


def test_unparseable_message_names_the_content_type(
    upstream: FakeUpstream, client: httpx.Client
) -> None:
    upstream.respond(body="<html></html>", headers={"Content-Type": "text/html; charset=utf-8"})

    with pytest.raises(QuotaError) as caught:
        fetch("copilot", upstream, client)

    assert caught.value.message == (
        "127.0.0.1 answered with a body that is not JSON (text/html; charset=utf-8)"
    )


def test_oversized_body_is_refused(upstream: FakeUpstream, client: httpx.Client) -> None:
    upstream.respond(body=b'{"pad": "' + b"x" * MAX_BODY_BYTES + b'"}')

    with pytest.raises(QuotaError) as caught:
        fetch("claude", upstream, client)

    assert (caught.value.kind, caught.value.message) == (
        "unparseable",
        "127.0.0.1 sent a body larger than 1048576 bytes",
    )


def test_unreachable_upstream_is_a_transport_error(client: httpx.Client) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    # The port is closed now: nothing listens there.

    with pytest.raises(QuotaError) as caught:
        get_adapter("claude").fetch(
            url=f"http://127.0.0.1:{port}/api/oauth/usage", credential="tok", client=client
        )

    assert (caught.value.kind, caught.value.message) == (
        "transport",
        "could not talk to 127.0.0.1: ConnectError",
    )


def test_make_client_never_follows_redirects_and_sets_every_timeout() -> None:
    with make_client() as production_client:
        assert (production_client.follow_redirects, production_client.timeout) == (
            False,
            httpx.Timeout(connect=10.0, read=10.0, write=10.0, pool=10.0),
        )
