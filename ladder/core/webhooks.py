"""Webhooks, pure: which webhook targets are refused; the bodies, their signature and
the retry backoff. The transitions they carry are in `ladder/core/notifications.py`.

No Django, no clock, no IO: the shell (`ladder/services/webhooks.py`) resolves host names
and sends. All datetimes are aware UTC.
"""

from __future__ import annotations

import hashlib
import hmac
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from enum import StrEnum
from ipaddress import IPv4Address, IPv4Network, IPv6Address, IPv6Network, ip_address
from typing import Any, Final
from urllib.parse import urlsplit

from ladder.core.notifications import Kind, iso

# --------------------------------------------------------------------------- targets


class TargetRefused(ValueError):
    """A webhook URL, or an address its host resolves to, that is never sent to."""


@dataclass(frozen=True, slots=True)
class Target:
    """A webhook URL taken apart: where to connect and what to ask for."""

    scheme: str
    host: str  # lower-case, IDNA-encoded, without IPv6 brackets
    port: int
    path: str  # path and query, at least "/"

    @property
    def host_header(self) -> str:
        """The Host header: the name the operator wrote, with a non-default port."""
        name = f"[{self.host}]" if ":" in self.host else self.host
        default = 443 if self.scheme == "https" else 80
        return name if self.port == default else f"{name}:{self.port}"

    @property
    def origin(self) -> str:
        """Scheme, host and port: what the dashboard shows (a path may hold a secret)."""
        return f"{self.scheme}://{self.host_header}"

    def url_for(self, address: IPv4Address | IPv6Address) -> str:
        """The URL that connects to `address` itself, asking for this target's path."""
        host = f"[{address}]" if address.version == 6 else str(address)
        return f"{self.scheme}://{host}:{self.port}{self.path}"


MAX_URL_LENGTH: Final = 2000


def parse_target(url: str) -> Target:
    """Take a webhook URL apart; TargetRefused says why it is not acceptable."""
    if len(url) > MAX_URL_LENGTH:
        raise TargetRefused(f"The URL is longer than {MAX_URL_LENGTH} characters.")
    if any(ch.isspace() or ord(ch) < 32 or ord(ch) == 127 for ch in url):
        raise TargetRefused("The URL contains spaces or control characters.")
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as error:
        raise TargetRefused(f"The URL cannot be read: {error}.") from None
    scheme = parts.scheme.lower()
    if scheme not in ("http", "https"):
        raise TargetRefused("Only http and https URLs are allowed.")
    if "@" in parts.netloc:
        raise TargetRefused(
            "A user name or password in the URL is not allowed (the signature authenticates)."
        )
    host = (parts.hostname or "").rstrip(".")
    if not host:
        raise TargetRefused("The URL has no host.")
    try:
        host = host.encode("idna").decode("ascii").lower()
    except UnicodeError:
        raise TargetRefused("The host name is not a valid domain name.") from None
    if port == 0:
        raise TargetRefused("Port 0 is not a port.")
    path = parts.path or "/"
    if parts.query:
        path += "?" + parts.query
    return Target(scheme, host, port or (443 if scheme == "https" else 80), path)


IPAddress = IPv4Address | IPv6Address

# Refused whatever NOTIFY_ALLOW_PRIVATE_TARGETS says: cloud metadata services (most live
# in link-local space, which is refused as a whole, but some do not).
METADATA_ADDRESSES: Final[frozenset[IPAddress]] = frozenset(
    ip_address(a)
    for a in (
        "169.254.169.254",  # AWS, GCP, Azure, OpenStack, Oracle
        "169.254.170.2",  # AWS ECS task metadata
        "fd00:ec2::254",  # AWS IMDS over IPv6 (unique-local space, not link-local)
        "100.100.100.200",  # Alibaba Cloud (shared address space)
        "192.0.0.192",  # Oracle Cloud classic
    )
)
THIS_NETWORK: Final = IPv4Network("0.0.0.0/8")  # connecting to 0.x reaches this host
NAT64: Final = IPv6Network("64:ff9b::/96")
# Deprecated IPv6 site-local space: Python calls it global, it is a private range.
SITE_LOCAL: Final = IPv6Network("fec0::/10")


def _embedded_ipv4(address: IPv6Address) -> IPv4Address | None:
    """The IPv4 address an IPv6 address carries (mapped, NAT64, 6to4, Teredo client)."""
    if address.ipv4_mapped is not None:
        return address.ipv4_mapped
    if address in NAT64:
        return IPv4Address(int(address) & 0xFFFFFFFF)
    if address.sixtofour is not None:
        return address.sixtofour
    if address.teredo is not None:
        return address.teredo[1]
    return None


def address_refusal(address: IPAddress, *, allow_private: bool) -> str | None:
    """Why a resolved address is never sent to; None when it may be. Link-local,
    metadata, unspecified, multicast and reserved addresses are refused always; loopback
    and private ones unless private targets are allowed."""
    if isinstance(address, IPv6Address):
        embedded = _embedded_ipv4(address)
        if embedded is not None:
            inner = address_refusal(embedded, allow_private=allow_private)
            if inner is not None:
                return f"{inner} (inside {address})"
            if address.ipv4_mapped is not None:
                return None  # ::ffff:a.b.c.d is the IPv4 address itself
    if address in METADATA_ADDRESSES:
        return f"{address} is a cloud metadata address"
    if address.is_link_local:
        return f"{address} is a link-local address"
    if address.is_unspecified or (isinstance(address, IPv4Address) and address in THIS_NETWORK):
        return f"{address} is an unspecified address"
    if address.is_multicast:
        return f"{address} is a multicast address"
    if address.is_loopback:
        return None if allow_private else f"{address} is a loopback address"
    is_site_local = isinstance(address, IPv6Address) and address in SITE_LOCAL
    if address.is_global and not is_site_local:
        return None
    if address.is_reserved or address == IPv4Address("255.255.255.255"):
        return f"{address} is a reserved address"
    return None if allow_private else f"{address} is a private address"


def addresses_refusal(addresses: Sequence[IPAddress], *, allow_private: bool) -> str | None:
    """Why a host's addresses are refused: none at all, or any one of them refused (a
    name that resolves to one public and one internal address is refused)."""
    if not addresses:
        return "the host resolves to no address"
    for address in addresses:
        refusal = address_refusal(address, allow_private=allow_private)
        if refusal is not None:
            return refusal
    return None


# --------------------------------------------------------------------------- bodies


@dataclass(frozen=True, slots=True)
class Message:
    """One delivery's content: the same bytes on every attempt."""

    delivery_id: str
    event_id: str
    kind: Kind
    occurred_at: datetime
    summary: str
    details: Mapping[str, Any] = field(default_factory=dict)
    # The dashboard page of the subject (a connection, a pool, the spend...); "" for none.
    dashboard_url: str = ""

    @property
    def recovers_at(self) -> datetime | None:
        """When the subject is expected to recover, where that is known (`recovery_of`)."""
        return recovery_of(self.kind, self.details)


def _instant(value: Any) -> datetime | None:
    if not isinstance(value, str):
        return None
    try:
        moment = datetime.fromisoformat(value)
    except ValueError:
        return None
    return moment if moment.tzinfo is not None else None


def recovery_of(kind: Kind, details: Mapping[str, Any]) -> datetime | None:
    """When a notified problem is expected to end, where its details know: a plan that
    dropped out or runs low comes back at its quota window's reset; an exhausted budget
    (100 % and over) at its window's end. None otherwise (a rejected credential waits for
    an operator; an empty pool for its plans; news of a recovery needs none)."""
    if kind in (Kind.PLAN_EXHAUSTED, Kind.PLAN_LOW):
        return _instant(details.get("reset_at"))
    if kind is Kind.BUDGET_CROSSED and int(details.get("threshold_percent") or 0) >= 100:
        return _instant(details.get("window_end"))
    return None


def json_body(message: Message) -> bytes:
    """The generic JSON body (keys sorted, compact): the dashboard page of the subject
    and, where known, when it is expected to recover (null otherwise)."""
    document = {
        "id": message.delivery_id,
        "event_id": message.event_id,
        "kind": message.kind.value,
        "title": message.kind.headline,
        "summary": message.summary,
        "occurred_at": iso(message.occurred_at),
        "details": dict(message.details),
        "test": message.kind is Kind.TEST,
        "source": "omniroute-admin",
        "dashboard_url": message.dashboard_url or None,
        "recovers_at": iso(message.recovers_at),
    }
    return json.dumps(document, sort_keys=True, separators=(",", ":")).encode()


def slack_text(text: str) -> str:
    """Escape Slack's control characters, so no text can become a mention or a link."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def slack_body(message: Message) -> bytes:
    """A Slack-compatible incoming-webhook body: `{"text": ...}`."""
    text = f"*OmniRoute: {slack_text(message.kind.headline)}*\n{slack_text(message.summary)}"
    recovers_at = message.recovers_at
    if recovers_at is not None:
        text += f"\nExpected back: {recovers_at.astimezone(UTC):%Y-%m-%d %H:%M} UTC"
    if message.dashboard_url:
        text += f"\nIn the dashboard: {slack_text(message.dashboard_url)}"
    return json.dumps({"text": text}, separators=(",", ":")).encode()


def body_for(body_format: str, message: Message) -> bytes:
    """The body of a webhook's format (`json` or `slack`)."""
    return slack_body(message) if body_format == "slack" else json_body(message)


SIGNATURE_HEADER: Final = "X-OmniRoute-Signature"
TIMESTAMP_HEADER: Final = "X-OmniRoute-Timestamp"
DELIVERY_HEADER: Final = "X-OmniRoute-Delivery"
EVENT_HEADER: Final = "X-OmniRoute-Event"
ATTEMPT_HEADER: Final = "X-OmniRoute-Attempt"
SIGNATURE_TOLERANCE_SECONDS: Final = 300


def signature(secret: str, timestamp: int, body: bytes) -> str:
    """`sha256=` and the hex HMAC-SHA256, keyed by the secret, of `<timestamp>.<body>`."""
    signed = str(timestamp).encode() + b"." + body
    return "sha256=" + hmac.new(secret.encode(), signed, hashlib.sha256).hexdigest()


def verify_signature(
    secret: str,
    *,
    timestamp_header: str,
    signature_header: str,
    body: bytes,
    now_unix: float,
    tolerance_seconds: int = SIGNATURE_TOLERANCE_SECONDS,
) -> bool:
    """A receiver's check: the signature matches and the timestamp is recent (so a
    captured request cannot be replayed later)."""
    if not timestamp_header.isdigit() or len(timestamp_header) > 12:
        return False
    timestamp = int(timestamp_header)
    if abs(now_unix - timestamp) > tolerance_seconds:
        return False
    return hmac.compare_digest(signature(secret, timestamp, body), signature_header)


def signed_headers(
    message: Message, body: bytes, secret: str, timestamp: int, attempt: int
) -> dict[str, str]:
    """The headers of one attempt: content type, delivery id, kind, timestamp, signature."""
    return {
        "Content-Type": "application/json",
        DELIVERY_HEADER: message.delivery_id,
        EVENT_HEADER: message.kind.value,
        ATTEMPT_HEADER: str(attempt),
        TIMESTAMP_HEADER: str(timestamp),
        SIGNATURE_HEADER: signature(secret, timestamp, body),
    }


# --------------------------------------------------------------------------- retries


class Verdict(StrEnum):
    """What an attempt's result means for the delivery."""

    DELIVERED = "delivered"
    RETRY = "retry"
    GIVE_UP = "give_up"


# Answers that may succeed later: a timeout, too early, too many requests.
RETRYABLE_CLIENT_ERRORS: Final = frozenset({408, 425, 429})


def attempt_verdict(
    status_code: int | None, *, is_refused: bool, attempt: int, max_attempts: int
) -> Verdict:
    """A 2xx delivers. A refused target, a redirect (never followed) and a 4xx other
    than 408/425/429 give up at once: trying again cannot help. Anything else (no
    answer, 5xx, 408/425/429) is tried again until `max_attempts` attempts were made."""
    if is_refused:
        return Verdict.GIVE_UP
    if status_code is not None and 200 <= status_code < 300:
        return Verdict.DELIVERED
    is_permanent = status_code is not None and (
        300 <= status_code < 400
        or (400 <= status_code < 500 and status_code not in RETRYABLE_CLIENT_ERRORS)
    )
    if is_permanent or attempt >= max_attempts:
        return Verdict.GIVE_UP
    return Verdict.RETRY


def retry_delay_seconds(attempt: int, *, base_seconds: float, max_seconds: float) -> float:
    """The wait after the n-th failed attempt: `min(base * 2^(n-1), max)`."""
    return float(min(base_seconds * 2 ** (attempt - 1), max_seconds))
