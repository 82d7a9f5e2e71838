"""A canary credential through every registered adapter, against upstream answers that
make fetch or parse fail in every way we could think of (or succeed with names): no
error message, reading detail or window name that poll() returns quotes it, in any of
the common encodings an upstream may echo it in."""

from __future__ import annotations

import base64
import html
import json
from datetime import UTC, datetime
from typing import Any
from urllib.parse import quote, quote_plus

import httpx
import pytest

from ladder.quota.base import ParsedQuota, QuotaError
from ladder.quota.registry import REGISTRY

from .fake_upstream import FakeUpstream

NOW = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)
TOKEN = "sk-ant-oat01-CANARYADAPTER0123456789"
# Every character that one of the common encodings rewrites.
SPECIAL = "sk-CANARYSPECIAL/+\"<&>'%7e\\=0123456789"
PROJECT = "project-CANARYPROJECT42"
ACCOUNT = "account-CANARYACCOUNT42"
HTTP_ADAPTERS = [name for name in REGISTRY if name != "simulated"]


def echoes(secret: str) -> list[str]:
    """The forms an upstream may echo a secret in (computed here, not by the code)."""
    raw = secret.encode()
    return [
        secret,
        secret.lower(),
        secret.upper(),
        json.dumps(secret)[1:-1],
        quote(secret, safe=""),
        quote_plus(secret),
        html.escape(secret),
        raw.hex(),
        base64.b64encode(raw).decode(),
        base64.urlsafe_b64encode(raw).decode(),
        base64.b64encode(b"Bearer " + raw).decode(),
        base64.b64encode(b"user:" + raw).decode(),
    ]


def forbidden(secrets: list[str]) -> list[str]:
    """What must appear nowhere: each echo form, and the canaries' distinctive core."""
    found = ["canary"]
    for secret in secrets:
        found += [form.lower() for form in echoes(secret)]
        for pad in (b"", b"x", b"xy"):  # the secret inside a longer base64 blob
            found.append(base64.b64encode(pad + secret.encode()).decode()[4:-4].lower())
    return found


def credential_for(adapter: str, token: str) -> tuple[str, list[str]]:
    """The adapter's credential carrying the canary, and its secret parts."""
    if adapter in ("claude", "copilot"):
        return token, [token]
    if adapter == "codex":
        return json.dumps({"access_token": token, "account_id": ACCOUNT}), [token, ACCOUNT]
    if adapter in ("gemini-cli", "antigravity"):
        return json.dumps({"access_token": token, "project": PROJECT}), [token, PROJECT]
    raise AssertionError(f"add the {adapter} adapter's credential to this test")


def payloads(echo: str) -> list[Any]:
    """JSON usage payloads that put an echo wherever some adapter reads a name or value."""
    future = "2999-01-01T00:00:00Z"
    return [
        echo,
        [echo],
        {echo: echo},
        {f"seven_day_{echo}": echo},
        {f"seven_day_{echo}": {"utilization": 10}},
        {"five_hour": {"utilization": 10, "resets_at": echo}},
        {"five_hour": {"utilization": echo}},
        {"rate_limit": {"primary_window": {"used_percent": echo}}},
        {"rate_limit": {"primary_window": {"used_percent": 5, "reset_at": echo}}},
        {"rate_limit": echo, "limit_reached": echo},
        {"rate_limit": {"primary_window": {"used_percent": 5}}, "detail": echo},
        {"quota_snapshots": {"chat": {"percent_remaining": 50}}, "quota_reset_date": echo},
        {"quota_snapshots": {"chat": {"percent_remaining": echo}}},
        {"quota_snapshots": {echo: echo, "chat": echo}},
        {"quota_snapshots": {"chat": {"percent_remaining": 50}}, echo: echo},
        {"buckets": [{"modelId": echo, "remainingFraction": 0.5, "resetTime": future}]},
        {"buckets": [{"modelId": echo, "remainingFraction": echo}]},
        {"buckets": [{"modelId": echo, "resetTime": echo}]},
        {"models": {echo: {"quotaInfo": {"remainingFraction": 0.5, "resetTime": future}}}},
        {"models": {echo: {"quotaInfo": {"remainingFraction": echo}}}},
        {"models": {echo: echo}},
    ]


Reply = tuple[int, bytes, dict[str, str]]


def replies(secrets: list[str]) -> list[Reply]:
    """Upstream answers (status, body, headers), each echoing one of the secrets."""
    as_json = {"Content-Type": "application/json"}
    answers: list[Reply] = []
    for secret in secrets:
        for echo in echoes(secret):
            header = f"Authorization: Bearer {echo}"
            answers += [
                # Verbatim: an upstream echoing the secret in one encoding, or as JSON.
                (500, f'{{"error": "bad {header}"}}'.encode(), as_json),
                (500, json.dumps({"error": f"bad {header}"}).encode(), as_json)
                if echo == secret
                else (503, header.encode(), as_json),
                (400, f"refused {header}".encode(), {"Content-Type": "text/plain"}),
                (502, ("x" * 110 + echo).encode(), as_json),  # straddles the excerpt's cut
                (401, header.encode(), as_json),
                (429, header.encode(), {**as_json, "Retry-After": "1"}),
                (200, f"not json {header}".encode(), {"Content-Type": f"text/plain; t={echo}"}),
                (302, b"", {"Location": f"https://evil.example/{echo}"}),
            ]
            if echo.replace("-", "").isalnum():
                answers.append((307, b"", {"Location": f"https://{echo}.example/"}))
        for echo in (secret, secret.lower()):
            answers += [(200, json.dumps(p).encode(), as_json) for p in payloads(echo)]
    answers.append((200, b"\xff\xfe" + secrets[0].encode(), as_json))
    answers.append((200, b"[" * 100_000 + secrets[0].encode(), as_json))
    return answers


def simulated_credentials(token: str) -> list[str]:
    """Simulated configs (the credential is the config) that its fetch or parse refuses."""
    return [
        "{" + token,
        "[" * 50_000 + json.dumps(token),
        json.dumps([token]),
        json.dumps({token: 1}),
        json.dumps({"plan_size": 5, token: token}),
        json.dumps({"epoch": token}),
        json.dumps({"plan_size": token}),
        json.dumps({"burn_per_minute": -1, "epoch": token}),
    ]


def outcome_text(outcome: ParsedQuota | QuotaError) -> str:
    """Everything of a poll's outcome that gets stored, shown or logged."""
    if isinstance(outcome, QuotaError):
        return f"{outcome} {outcome.args!r}"
    return f"{outcome.detail} {[w.name for w in outcome.windows]}"


def poll(name: str, url: str, credential: str, client: httpx.Client) -> ParsedQuota | QuotaError:
    try:
        return REGISTRY[name].poll(url=url, credential=credential, client=client, now=NOW)
    except QuotaError as error:
        return error


def assert_clean(text: str, secrets: list[str], where: str) -> None:
    lowered = text.lower()
    for form in forbidden(secrets):
        assert form not in lowered, f"{form!r} leaked into {where}: {text[:300]!r}"


@pytest.mark.parametrize("token", [TOKEN, SPECIAL], ids=["plain", "special-characters"])
@pytest.mark.parametrize("name", HTTP_ADAPTERS)
def test_no_adapter_error_or_reading_quotes_the_credential(
    upstream: FakeUpstream, client: httpx.Client, name: str, token: str
) -> None:
    credential, secrets = credential_for(name, token)
    outcomes = []
    for status, body, headers in replies(secrets):
        upstream.respond(status=status, body=body, headers=headers)
        outcome = poll(name, upstream.url(f"/{name}"), credential, client)
        outcomes.append(outcome)
        assert_clean(outcome_text(outcome), secrets, f"{name} after {status} {body[:60]!r}")
    # ... while the polls really sent the credential, and some readings succeeded
    assert {r.headers["authorization"].split(" ")[-1] for r in upstream.received} == {token}
    assert any(isinstance(outcome, ParsedQuota) and outcome.windows for outcome in outcomes)
    assert any(isinstance(outcome, QuotaError) for outcome in outcomes)


@pytest.mark.parametrize("token", [TOKEN, SPECIAL], ids=["plain", "special-characters"])
def test_no_simulated_config_error_quotes_the_config(client: httpx.Client, token: str) -> None:
    for credential in simulated_credentials(token):
        outcome = poll("simulated", "simulated://local", credential, client)

        assert isinstance(outcome, QuotaError), credential[:60]
        assert_clean(outcome_text(outcome), [token], f"simulated {credential[:60]!r}")


def test_a_header_value_that_breaks_the_request_is_not_quoted(
    upstream: FakeUpstream, client: httpx.Client
) -> None:
    credential = json.dumps({"access_token": TOKEN, "account_id": "x\r\n" + ACCOUNT})

    outcome = poll("codex", upstream.url("/codex"), credential, client)

    assert isinstance(outcome, QuotaError)
    assert outcome.kind == "transport"
    assert_clean(outcome_text(outcome), [TOKEN, ACCOUNT], "the transport error")


def test_an_adapter_bug_becomes_an_error_that_quotes_nothing(client: httpx.Client) -> None:
    from dataclasses import replace

    def crashing_parse(payload: Any, now: datetime) -> ParsedQuota:
        raise KeyError(f"no field in {payload!r}")

    adapter = replace(REGISTRY["simulated"], parse=crashing_parse)

    with pytest.raises(QuotaError) as caught:
        adapter.poll(url="", credential=json.dumps({"epoch": TOKEN}), client=client, now=NOW)

    assert (caught.value.kind, caught.value.message) == (
        "unparseable",
        "the simulated parser failed: KeyError",
    )
    assert caught.value.__cause__ is None
    assert caught.value.__suppress_context__


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        pytest.param(f"x {TOKEN} y", "x [redacted] y", id="raw"),
        pytest.param(f"x {TOKEN.upper()} y", "x [redacted] y", id="other-case"),
        pytest.param(f"a={quote(SPECIAL, safe='')}", "a=[redacted]", id="url-encoded"),
        pytest.param(json.dumps({"t": SPECIAL}), '{"t": "[redacted]"}', id="json-escaped"),
        pytest.param(f"t={TOKEN.encode().hex()}", "t=[redacted]", id="hex"),
    ],
)
def test_the_redactor_removes_the_credential_in_its_common_encodings(
    text: str, expected: str
) -> None:
    from ladder.quota.base import Redactor

    assert Redactor([TOKEN, SPECIAL]).scrub(text) == expected


def test_the_redactor_finds_a_credential_inside_a_longer_base64_blob() -> None:
    from ladder.quota.base import Redactor

    for prefix in (b"", b"u", b"us", b"user:"):
        blob = base64.b64encode(prefix + TOKEN.encode() + b":tail").decode()

        kept = Redactor([TOKEN]).scrub(blob).split("[redacted]")

        assert len(kept) == 2, prefix
        # At most the two 4-character groups the token shares with its neighbours stay.
        assert len("".join(kept)) <= len(blob) - len(TOKEN) * 4 // 3 + 8, prefix


def test_the_redactor_leaves_the_credential_field_names_alone() -> None:
    from ladder.quota.base import Redactor

    redactor = Redactor.for_credential(json.dumps({"access_token": TOKEN, "project": PROJECT}))

    assert redactor.scrub(f"project {PROJECT} access_token {TOKEN}") == (
        "project [redacted] access_token [redacted]"
    )
