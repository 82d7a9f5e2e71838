"""Notifications, pure: given what was last notified about each subject and what is
observed now, the transitions to notify (one per transition, none while a state holds);
which webhook targets are refused; the bodies, their signature and the retry backoff.

No Django, no clock, no IO: the shell (`ladder/services/notifications.py`) observes, stores the
last notified state, resolves host names and sends. All datetimes are aware UTC.

Subjects and their states (the first is the baseline a never-seen subject starts in, so
a subject first seen unhealthy is notified, one first seen healthy is not):

    readings            fresh | stale
    subscription        non_empty | empty_pending (empty, not yet for long enough) | empty
    plan:<connection>   in_play | dropped_out
    credential:<conn.>  ok | rejected
    budget:<rung>       0 | 50 | 80 | 100 (the highest threshold notified), scoped to one
                        budget window and one budget amount
"""

from __future__ import annotations

import hashlib
import hmac
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from enum import StrEnum
from ipaddress import IPv4Address, IPv4Network, IPv6Address, IPv6Network, ip_address
from typing import Any, Final
from urllib.parse import urlsplit

# --------------------------------------------------------------------------- kinds


class Kind(StrEnum):
    """What a notification is about; a webhook subscribes to some of these."""

    PLAN_EXHAUSTED = "plan_exhausted"
    PLAN_BACK = "plan_back"
    BUDGET_CROSSED = "budget_crossed"
    READINGS_STALE = "readings_stale"
    READINGS_FRESH = "readings_fresh"
    CREDENTIAL_REJECTED = "credential_rejected"
    SUBSCRIPTION_EMPTY = "subscription_empty"
    SUBSCRIPTION_BACK = "subscription_back"
    TEST = "test"

    @property
    def headline(self) -> str:
        """A short human title, the first line of every body."""
        return _TITLES[self]


_TITLES: Final = {
    Kind.PLAN_EXHAUSTED: "Plan connection dropped out",
    Kind.PLAN_BACK: "Plan connection is back",
    Kind.BUDGET_CROSSED: "Paid rung budget threshold crossed",
    Kind.READINGS_STALE: "Quota readings are stale",
    Kind.READINGS_FRESH: "Quota readings are fresh again",
    Kind.CREDENTIAL_REJECTED: "Credential rejected",
    Kind.SUBSCRIPTION_EMPTY: "auto/subscription is empty",
    Kind.SUBSCRIPTION_BACK: "auto/subscription has usable connections again",
    Kind.TEST: "Test notification",
}
# The kinds the rules produce (a webhook may subscribe to these; TEST is always sent).
SUBSCRIBABLE_KINDS: Final = tuple(kind for kind in Kind if kind is not Kind.TEST)

THRESHOLDS: Final = (50, 80, 100)

READINGS: Final = "readings"
SUBSCRIPTION: Final = "subscription"
PLAN_PREFIX: Final = "plan:"
CREDENTIAL_PREFIX: Final = "credential:"
BUDGET_PREFIX: Final = "budget:"

FRESH, STALE = "fresh", "stale"
NON_EMPTY, EMPTY_PENDING, EMPTY = "non_empty", "empty_pending", "empty"
IN_PLAY, DROPPED_OUT = "in_play", "dropped_out"
OK, REJECTED = "ok", "rejected"

# --------------------------------------------------------------------------- observations


@dataclass(frozen=True, slots=True)
class PlanObservation:
    """One active plan (billing `subscription`) connection's hysteresis state."""

    connection_id: str
    is_dropped_out: bool
    since: datetime | None
    reason: str


@dataclass(frozen=True, slots=True)
class CredentialObservation:
    """An active connection whose usage endpoint refused its credential."""

    connection_id: str
    message: str


@dataclass(frozen=True, slots=True)
class BudgetObservation:
    """One paid rung's spend against its budget in the current window."""

    rung: str
    spent_usd: Decimal
    budget_usd: Decimal | None
    budget_window: str
    window_start: datetime
    window_end: datetime


@dataclass(frozen=True, slots=True)
class Observation:
    """Everything the rules look at, observed at `now`."""

    now: datetime
    newest_polled_reading_at: datetime | None = None
    max_state_age_seconds: int = 180
    subscription_is_empty: bool = False
    # Distinct excluded connections of auto/subscription per reason, for the message.
    subscription_reasons: Mapping[str, int] = field(default_factory=dict)
    subscription_empty_after: timedelta = timedelta(minutes=5)
    plans: Sequence[PlanObservation] = ()
    rejected_credentials: Sequence[CredentialObservation] = ()
    budgets: Sequence[BudgetObservation] = ()


@dataclass(frozen=True, slots=True)
class Notified:
    """What was last notified about one subject. `sequence` counts the transitions
    notified so far; (subject, sequence) names each transition, so two evaluators that
    start from the same state name the same transition the same way."""

    status: str
    since: datetime | None = None
    sequence: int = 0
    scope: str = ""


@dataclass(frozen=True, slots=True)
class Transition:
    """One change to notify."""

    kind: Kind
    subject: str
    sequence: int
    at: datetime
    summary: str
    details: Mapping[str, Any] = field(default_factory=dict)

    @property
    def key(self) -> str:
        """The transition's stable name: the same for every webhook and every retry."""
        return f"{self.subject}#{self.sequence}"


@dataclass(frozen=True, slots=True)
class Evaluation:
    """The transitions to notify, in a fixed order, and the subjects whose stored state
    changes (with or without a notification)."""

    transitions: tuple[Transition, ...]
    changes: Mapping[str, Notified]


# --------------------------------------------------------------------------- evaluation


def readings_stale_since(
    newest_polled_reading_at: datetime | None, max_state_age_seconds: int, now: datetime
) -> datetime | None:
    """When polled readings went stale (the newest one is older than the maximum state
    age: the worker or the broker is likely down); None while fresh or with none."""
    if newest_polled_reading_at is None:
        return None
    limit = newest_polled_reading_at + timedelta(seconds=max_state_age_seconds)
    return limit if limit < now else None


def budget_level(spent_usd: Decimal, budget_usd: Decimal) -> int:
    """The highest threshold (percent of the budget) the spend has reached; 0 for none."""
    reached = [t for t in THRESHOLDS if spent_usd * 100 >= budget_usd * t]
    return reached[-1] if reached else 0


def budget_scope(budget: BudgetObservation) -> str:
    """The budget window and amount a budget state applies to: a new window, or a new
    budget amount, starts the thresholds afresh."""
    assert budget.budget_usd is not None
    return f"{budget.window_start.isoformat()} {_decimal_text(budget.budget_usd)}"


def evaluate(previous: Mapping[str, Notified], observed: Observation) -> Evaluation:
    """The transitions between the last notified states and the observed ones, in the
    order readings, subscription, plans, credentials, budgets."""
    run = _Run(previous)
    _readings(run, observed)
    _subscription(run, observed)
    _plans(run, observed)
    _credentials(run, observed)
    _budgets(run, observed)
    return Evaluation(tuple(run.transitions), dict(run.changes))


class _Run:
    def __init__(self, previous: Mapping[str, Notified]) -> None:
        self.previous = previous
        self.transitions: list[Transition] = []
        self.changes: dict[str, Notified] = {}

    def status(self, subject: str, baseline: str) -> Notified:
        return self.previous.get(subject) or Notified(baseline)

    def notify(
        self,
        subject: str,
        status: str,
        kind: Kind,
        at: datetime,
        summary: str,
        details: Mapping[str, Any],
        *,
        since: datetime | None = None,
        scope: str = "",
    ) -> None:
        old = self.previous.get(subject)
        sequence = (old.sequence if old else 0) + 1
        self.changes[subject] = Notified(status, since, sequence, scope)
        self.transitions.append(Transition(kind, subject, sequence, at, summary, details))

    def quietly(
        self, subject: str, status: str, *, since: datetime | None = None, scope: str = ""
    ) -> None:
        old = self.previous.get(subject)
        new = Notified(status, since, old.sequence if old else 0, scope)
        if new != old:
            self.changes[subject] = new


def _readings(run: _Run, observed: Observation) -> None:
    old = run.status(READINGS, FRESH)
    newest = observed.newest_polled_reading_at
    stale_since = readings_stale_since(newest, observed.max_state_age_seconds, observed.now)
    limit = observed.max_state_age_seconds
    if stale_since is not None and old.status != STALE:
        assert newest is not None
        age = _seconds(observed.now - newest)
        run.notify(
            READINGS,
            STALE,
            Kind.READINGS_STALE,
            stale_since,
            f"The newest polled quota reading is {age} s old, past the {limit} s limit: the "
            "worker or the broker may be down, and auto/subscription excludes every "
            "connection whose reading is stale.",
            {
                "newest_reading_at": _iso(newest),
                "newest_reading_age_seconds": age,
                "max_state_age_seconds": limit,
            },
            since=stale_since,
        )
    elif stale_since is None and old.status == STALE:
        if newest is None:
            summary = "Quota readings are no longer stale: no connection is polled any more."
        else:
            age = _seconds(observed.now - newest)
            summary = f"Quota readings arrive again: the newest polled reading is {age} s old."
        run.notify(
            READINGS,
            FRESH,
            Kind.READINGS_FRESH,
            newest or observed.now,
            summary,
            {"newest_reading_at": _iso(newest), "max_state_age_seconds": limit},
        )


def _subscription(run: _Run, observed: Observation) -> None:
    old = run.status(SUBSCRIPTION, NON_EMPTY)
    now = observed.now
    if observed.subscription_is_empty:
        if old.status == EMPTY:
            return
        since = old.since if old.status == EMPTY_PENDING and old.since is not None else now
        if now - since >= observed.subscription_empty_after:
            reasons = dict(sorted(observed.subscription_reasons.items()))
            why = ", ".join(f"{reason} {count}" for reason, count in reasons.items())
            run.notify(
                SUBSCRIPTION,
                EMPTY,
                Kind.SUBSCRIPTION_EMPTY,
                since + observed.subscription_empty_after,
                f"auto/subscription has had no usable connection for "
                f"{_seconds(now - since)} s (since {_iso(since)}): requests naming it get an "
                "empty pool." + (f" Excluded connections by reason: {why}." if why else ""),
                {
                    "auto_id": "auto/subscription",
                    "empty_since": _iso(since),
                    "empty_for_seconds": _seconds(now - since),
                    "excluded_by_reason": reasons,
                },
                since=since,
            )
        elif old.status != EMPTY_PENDING:
            run.quietly(SUBSCRIPTION, EMPTY_PENDING, since=since)
        return
    if old.status == EMPTY:
        run.notify(
            SUBSCRIPTION,
            NON_EMPTY,
            Kind.SUBSCRIPTION_BACK,
            now,
            "auto/subscription has usable plan connections again"
            + (f" (it was empty since {_iso(old.since)})." if old.since else "."),
            {"auto_id": "auto/subscription", "empty_since": _iso(old.since)},
        )
    elif old.status == EMPTY_PENDING:
        # Empty for less than the set time: nothing was notified, nothing to take back.
        run.quietly(SUBSCRIPTION, NON_EMPTY)


def _plans(run: _Run, observed: Observation) -> None:
    # A plan connection no longer observed (deleted, inactive, re-curated) keeps its
    # state: should it come back in the same state, that is not a transition.
    for plan in sorted(observed.plans, key=lambda p: p.connection_id):
        subject = PLAN_PREFIX + plan.connection_id
        old = run.status(subject, IN_PLAY)
        status = DROPPED_OUT if plan.is_dropped_out else IN_PLAY
        if status == old.status:
            continue
        details = {
            "connection_id": plan.connection_id,
            "since": _iso(plan.since),
            "reason": plan.reason,
        }
        if plan.is_dropped_out:
            summary = (
                f"Plan connection {plan.connection_id} dropped out: {plan.reason}. "
                "Traffic that allows it escalates to the next rung."
            )
            kind = Kind.PLAN_EXHAUSTED
        else:
            summary = f"Plan connection {plan.connection_id} is back in play: {plan.reason}."
            kind = Kind.PLAN_BACK
        run.notify(subject, status, kind, plan.since or observed.now, summary, details)


def _credentials(run: _Run, observed: Observation) -> None:
    rejected = {c.connection_id: c for c in observed.rejected_credentials}
    for connection_id in sorted(rejected):
        subject = CREDENTIAL_PREFIX + connection_id
        if run.status(subject, OK).status == REJECTED:
            continue
        message = rejected[connection_id].message
        run.notify(
            subject,
            REJECTED,
            Kind.CREDENTIAL_REJECTED,
            observed.now,
            f"The credential of connection {connection_id} was refused: {message} Its "
            "quota cannot be read until an operator replaces it.",
            {"connection_id": connection_id, "message": message},
        )
    for subject, old in sorted(run.previous.items()):
        connection_id = subject.removeprefix(CREDENTIAL_PREFIX)
        if (
            subject.startswith(CREDENTIAL_PREFIX)
            and old.status == REJECTED
            and connection_id not in rejected
        ):
            # Accepted again (or gone): the next rejection is a new transition.
            run.quietly(subject, OK)


def _budgets(run: _Run, observed: Observation) -> None:
    for budget in sorted(observed.budgets, key=lambda b: b.rung):
        # No budget: never gated, nothing to cross. Budget 0: the rung is disabled.
        if budget.budget_usd is None or budget.budget_usd <= 0:
            continue
        subject = BUDGET_PREFIX + budget.rung
        scope = budget_scope(budget)
        old = run.previous.get(subject)
        notified = int(old.status) if old is not None and old.scope == scope else 0
        level = budget_level(budget.spent_usd, budget.budget_usd)
        if level <= notified:
            continue
        percent = budget.spent_usd * 100 / budget.budget_usd
        passed = [t for t in THRESHOLDS if notified < t <= level]
        tail = (
            " The rung is exhausted: it is left out of every pool until the window ends."
            if level >= 100
            else ""
        )
        # One notification for the highest threshold reached: a jump from 40 % to 100 %
        # is one message naming every threshold it passed, not three.
        run.notify(
            subject,
            str(level),
            Kind.BUDGET_CROSSED,
            observed.now,
            f"The {budget.rung} rung has spent {budget.spent_usd:.2f} USD of its "
            f"{budget.budget_usd:.2f} USD {budget.budget_window} budget "
            f"({_decimal_text(round(percent, 1))} %), past the {level} % threshold." + tail,
            {
                "rung": budget.rung,
                "threshold_percent": level,
                "thresholds_passed": passed,
                "spent_usd": float(budget.spent_usd),
                "budget_usd": float(budget.budget_usd),
                "spent_percent": float(round(percent, 2)),
                "budget_window": budget.budget_window,
                "window_start": _iso(budget.window_start),
                "window_end": _iso(budget.window_end),
            },
            scope=scope,
        )


def _seconds(delta: timedelta) -> int:
    return int(delta.total_seconds())


def _iso(moment: datetime | None) -> str | None:
    return moment.astimezone(UTC).isoformat() if moment is not None else None


def _decimal_text(value: Decimal) -> str:
    """A decimal as typed ("100", "12.5"), never in exponent form ("1E+2")."""
    return format(value.normalize(), "f")


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


def json_body(message: Message) -> bytes:
    """The generic JSON body (keys sorted, compact)."""
    document = {
        "id": message.delivery_id,
        "event_id": message.event_id,
        "kind": message.kind.value,
        "title": message.kind.headline,
        "summary": message.summary,
        "occurred_at": _iso(message.occurred_at),
        "details": dict(message.details),
        "test": message.kind is Kind.TEST,
        "source": "omniroute-admin",
    }
    return json.dumps(document, sort_keys=True, separators=(",", ":")).encode()


def slack_text(text: str) -> str:
    """Escape Slack's control characters, so no text can become a mention or a link."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def slack_body(message: Message) -> bytes:
    """A Slack-compatible incoming-webhook body: `{"text": ...}`."""
    text = f"*OmniRoute: {slack_text(message.kind.headline)}*\n{slack_text(message.summary)}"
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
