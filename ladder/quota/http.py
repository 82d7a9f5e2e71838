"""HTTP for the quota adapters: a client that never follows redirects, and one request
whose failures all become a `QuotaError` with every echo of the credential scrubbed."""

from __future__ import annotations

import json as jsonlib
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any
from urllib.parse import urlsplit

import httpx

from .base import ErrorKind, QuotaError, Redactor, credential_parts, unparseable
from .values import parse_http_date, parse_retry_after

# A usage payload is a few kilobytes; anything far larger is not the endpoint we expect,
# and reading it whole would let a hostile upstream exhaust the worker's memory.
MAX_BODY_BYTES = 1_048_576
USER_AGENT = "omniroute-admin-quota/1"


def make_client(timeout_seconds: float = 10.0) -> httpx.Client:
    """Build an HTTP client with explicit timeouts that never follows redirects."""
    timeout = httpx.Timeout(
        connect=timeout_seconds, read=timeout_seconds, write=timeout_seconds, pool=timeout_seconds
    )
    return httpx.Client(timeout=timeout, follow_redirects=False, headers={"User-Agent": USER_AGENT})


def _retry_after_seconds(response: httpx.Response) -> float | None:
    """Read Retry-After, measuring an HTTP date against the upstream's own Date header."""
    value = response.headers.get("retry-after")
    if value is None:
        return None
    # Both dates come from the upstream's clock, so their difference is free of clock skew.
    reference = parse_http_date(response.headers.get("date", "")) or datetime.now(UTC)
    return parse_retry_after(value, reference)


def _body_excerpt(response: httpx.Response, redactor: Redactor, limit: int = 120) -> str:
    """Return the start of an error body on one line, secrets redacted, for the message."""
    # Read past the limit by the longest secret form, so one cut at the limit is redacted
    # too: the cut comes after the redaction, never before it.
    wanted = limit + redactor.longest
    collected = b""
    for chunk in response.iter_bytes():
        collected += chunk
        if len(collected) >= wanted:
            break
    text = " ".join(collected[:wanted].decode("utf-8", errors="replace").split())
    # An upstream may echo the credential back in an error body; it must not reach a log.
    text = redactor.scrub(text)[:limit]
    return f": {text}" if text else ""


# Request headers that carry no part of a credential; every other one may.
_PUBLIC_HEADERS = frozenset({"accept", "anthropic-beta", "content-type", "user-agent"})


def _request_redactor(headers: Mapping[str, str], json: object) -> Redactor:
    """Build the redactor of a request: its credential-bearing headers and body strings."""
    secrets: set[str] = set()
    for name, value in headers.items():
        if name.lower() not in _PUBLIC_HEADERS:
            # "Bearer <token>" and "token <token>": the whole value and the token alone.
            secrets.update({value, value.split(" ")[-1]})
    secrets.update(credential_parts(json, frozenset()))
    return Redactor(secrets)


def _raise_for_status(response: httpx.Response, host: str, redactor: Redactor) -> None:
    """Map a non-2xx answer to the QuotaError kind the shell acts on."""
    status = response.status_code
    if 200 <= status < 300:
        return
    if 300 <= status < 400:
        target = urlsplit(response.headers.get("location", "")).hostname or "an unnamed location"
        # Never followed: a redirect could point the bearer token (or the worker) at
        # another host, such as a cloud metadata address.
        raise QuotaError(
            ErrorKind.REDIRECT_REFUSED,
            f"{host} answered HTTP {status} redirecting to {target}; redirects are never followed",
        )
    retry_after = _retry_after_seconds(response)
    if status in (401, 403):
        raise QuotaError(
            ErrorKind.CREDENTIAL_REJECTED, f"{host} rejected the credential (HTTP {status})"
        )
    if status == 429:
        raise QuotaError(ErrorKind.RATE_LIMITED, f"{host} is rate limiting (HTTP 429)", retry_after)
    raise QuotaError(
        ErrorKind.UPSTREAM_ERROR,
        f"{host} answered HTTP {status}{_body_excerpt(response, redactor)}",
        retry_after,
    )


def _read_json(response: httpx.Response, host: str) -> Any:
    """Read at most MAX_BODY_BYTES of the (decoded) body and parse it as JSON."""
    chunks: list[bytes] = []
    size = 0
    for chunk in response.iter_bytes():
        size += len(chunk)
        if size > MAX_BODY_BYTES:
            raise unparseable(f"{host} sent a body larger than {MAX_BODY_BYTES} bytes")
        chunks.append(chunk)
    try:
        return jsonlib.loads(b"".join(chunks))
    except (ValueError, RecursionError):
        content_type = response.headers.get("content-type", "no content type")
        raise unparseable(
            f"{host} answered with a body that is not JSON ({content_type})"
        ) from None


def request_json(
    client: httpx.Client,
    method: str,
    url: str,
    headers: Mapping[str, str],
    json: object = None,
) -> Any:
    """Send one request without following redirects and return the decoded JSON body."""
    host = urlsplit(url).hostname or "the upstream"
    redactor = _request_redactor(headers, json)
    try:
        with client.stream(
            method, url, headers=dict(headers), json=json, follow_redirects=False
        ) as response:
            _raise_for_status(response, host, redactor)
            return _read_json(response, host)
    except QuotaError as error:
        # Every part of a message that the upstream wrote (a redirect's host, a content
        # type, a body) may echo the request; "from None" drops the response it holds.
        raise redactor.scrub_error(error) from None
    except httpx.TimeoutException:
        raise QuotaError(ErrorKind.TIMEOUT, f"{host} did not answer in time") from None
    except httpx.InvalidURL:
        # Named, not quoted: the URL and the request built from it stay out of messages.
        raise QuotaError(ErrorKind.TRANSPORT, f"the URL of {host} is not valid") from None
    except httpx.RequestError as error:
        # The error itself may quote a header value (an illegal one, for instance).
        raise QuotaError(
            ErrorKind.TRANSPORT, f"could not talk to {host}: {type(error).__name__}"
        ) from None


def bearer_headers(token: str) -> dict[str, str]:
    """Return the Accept and bearer Authorization headers most usage endpoints want."""
    return {"Accept": "application/json", "Authorization": f"Bearer {token}"}
