"""Shared types and helpers for the quota adapters.

An adapter is a registry entry: a name, a default URL, an IO ``fetch`` that returns the
decoded JSON of the provider's usage endpoint, and a pure ``parse(payload, now)`` that
turns it into a ``ParsedQuota``. Nothing in this package imports Django; the shell maps a
``ParsedQuota`` (or a ``QuotaError``) to a stored reading.

Payload rules shared by every parser: a payload or a known field of the wrong type raises
``QuotaError(kind="unparseable")``; a known field that is missing or null simply yields no
window (or an unknown one); a payload with no usable window is an UNKNOWN reading, not an
error, because the provider answered and simply said nothing we can use.
"""

from __future__ import annotations

import base64
import html
import json as jsonlib
import math
import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any
from urllib.parse import quote, quote_plus

import httpx

from ladder.core.quota import binding_reading, derive_status
from ladder.core.types import OverageEvidence, OverageSays, QuotaStatus, WindowReading

from .values import epoch_to_datetime, parse_iso_instant

# Printable ASCII without spaces: anything else in a token would corrupt the header.
_TOKEN = re.compile(r"[\x21-\x7e]+")


class ErrorKind(StrEnum):
    CREDENTIAL_REJECTED = "credential_rejected"
    # The credential is malformed for its adapter; it was never sent anywhere.
    CREDENTIAL_INVALID = "credential_invalid"
    RATE_LIMITED = "rate_limited"
    TIMEOUT = "timeout"
    UPSTREAM_ERROR = "upstream_error"
    UNPARSEABLE = "unparseable"
    REDIRECT_REFUSED = "redirect_refused"
    TRANSPORT = "transport"


@dataclass(frozen=True, slots=True)
class ParsedQuota:
    """A provider's usage, reduced to the binding window plus every window for display,
    with what it says about billing past the plan's limit (None: nothing)."""

    status: QuotaStatus | None
    remaining_percent: float | None
    reset_at: datetime | None
    windows: tuple[WindowReading, ...]
    detail: str = ""
    evidence: OverageEvidence | None = None


class QuotaError(Exception):
    """A fetch or parse failure, with a kind the shell can act on."""

    def __init__(
        self, kind: ErrorKind, message: str, retry_after_seconds: float | None = None
    ) -> None:
        # All three go to Exception.args so the error survives pickling (Celery results).
        super().__init__(kind, message, retry_after_seconds)
        self.kind = kind
        self.message = message
        self.retry_after_seconds = retry_after_seconds

    def __str__(self) -> str:
        return f"{self.kind}: {self.message}"


def unknown(detail: str) -> ParsedQuota:
    """Return an UNKNOWN reading that carries its cause."""
    return ParsedQuota(
        status=QuotaStatus.UNKNOWN,
        remaining_percent=None,
        reset_at=None,
        windows=(),
        detail=detail,
    )


def clamp_percent(value: float) -> float:
    """Clamp a percentage to 0..100."""
    return max(0.0, min(100.0, value))


def make_window(
    name: str,
    remaining_percent: float | None,
    reset_at: datetime | None,
    now: datetime,
    *,
    model_scope: str | None = None,
) -> WindowReading:
    """Build a window: clamp remaining to 0..100; a window whose reset has passed is unknown."""
    if remaining_percent is not None:
        # Six decimals is far finer than any quota and keeps 0.35 * 100 reading 35.0.
        remaining_percent = round(clamp_percent(remaining_percent), 6)
    if reset_at is not None and reset_at <= now:
        # Deliberately unknown rather than full or as-is: the number describes a window
        # that no longer exists (guessing "full" would be invented data), and letting a
        # past reset bind would make the whole reading stale on arrival, forever.
        remaining_percent = None
    return WindowReading(
        name=name, remaining_percent=remaining_percent, reset_at=reset_at, model_scope=model_scope
    )


def evidence(says_can_meter: bool, detail: str) -> OverageEvidence:
    """Billing evidence read from a payload or headers (source and time: the shell's)."""
    says = OverageSays.CAN_METER if says_can_meter else OverageSays.HARD_STOP
    return OverageEvidence(says=says, detail=detail)


def with_evidence(parsed: ParsedQuota, found: OverageEvidence | None) -> ParsedQuota:
    """The reading carrying its evidence (unchanged when there is none)."""
    return parsed if found is None else replace(parsed, evidence=found)


def describe_window(window: WindowReading) -> str:
    """Say how much of one window is left and when it resets, for a human."""
    left = "unknown" if window.remaining_percent is None else f"{window.remaining_percent:.1f} %"
    if window.reset_at is None:
        return f"{window.name}: {left} left, no reset time given"
    return (
        f"{window.name}: {left} left, resets {window.reset_at.astimezone(UTC):%Y-%m-%d %H:%M} UTC"
    )


def quota_from_windows(
    windows: Iterable[WindowReading],
    *,
    is_limit_reached: bool = False,
    empty_detail: str = "the response holds no quota window",
) -> ParsedQuota:
    """Reduce windows to a reading: the binding window decides remaining, reset and status
    (among the unscoped windows: a window scoped to a model binds only that model)."""
    windows = tuple(windows)
    binding = binding_reading(windows)
    remaining = None if binding is None else binding.remaining_percent
    status = QuotaStatus.EXHAUSTED if is_limit_reached else derive_status(remaining)
    if is_limit_reached:
        detail = "the provider reports its limit reached"
        if binding is not None:
            detail = f"{detail}; {describe_window(binding)}"
    elif binding is None or remaining is None:
        detail = empty_detail if not windows else "no window says how much quota is left"
    elif remaining <= 0:
        detail = f"used up; {describe_window(binding)}"
    else:
        detail = f"binding window {describe_window(binding)}"
    return ParsedQuota(
        status=status,
        remaining_percent=remaining,
        reset_at=None if binding is None else binding.reset_at,
        windows=windows,
        detail=detail,
    )


# --- secrets out of every message ------------------------------------------------------

REDACTED = "[redacted]"
# Shorter strings cannot be told apart from the words of a message; a real token is
# far longer (and a credential part this short protects nothing).
MIN_SECRET_LENGTH = 6
# The credential fields the adapters define: names, not secrets, so never redacted.
CREDENTIAL_KEYS = frozenset({"access_token", "account_id", "project"})


def _base64_cores(secret: bytes) -> Iterator[str]:
    """Yield the base64 text of secret as it reads inside any longer base64 stream."""
    # Encoded at each of the three byte alignments, keeping only the characters made of
    # the secret's own bits: what an echoed "Basic"/JWT/base64 blob holding it contains.
    for offset in range(3):
        data = b"\0" * offset + secret
        start = -(-8 * offset // 6)
        end = 8 * len(data) // 6
        for encoded in (base64.b64encode(data), base64.urlsafe_b64encode(data)):
            yield encoded.decode()[start:end]


def secret_forms(secret: str) -> set[str]:
    """Return the secret and the common encodings an echo of it may take."""
    in_json = jsonlib.dumps(secret)[1:-1]
    forms = {
        secret,
        in_json,
        jsonlib.dumps(in_json)[1:-1],  # a JSON error quoting a JSON echo of the request
        jsonlib.dumps(secret, ensure_ascii=False)[1:-1],
        repr(secret)[1:-1],
        quote(secret, safe=""),
        quote(secret),
        quote_plus(secret),
        html.escape(secret),
        secret.encode().hex(),
        *_base64_cores(secret.encode()),
    }
    return {form for form in forms if len(form) >= MIN_SECRET_LENGTH}


def credential_parts(value: Any, known_keys: frozenset[str]) -> Iterator[str]:
    """Yield every string of a decoded JSON credential (keys other than field names too)."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for key, item in value.items():
            if key not in known_keys:
                yield key
            yield from credential_parts(item, known_keys)
    elif isinstance(value, list):
        for item in value:
            yield from credential_parts(item, known_keys)


class Redactor:
    """Replaces a set of secrets, and their common encodings, in text (case-insensitively)."""

    def __init__(self, secrets: Iterable[str]) -> None:
        forms: set[str] = set()
        for secret in secrets:
            if len(secret) >= MIN_SECRET_LENGTH:
                forms |= secret_forms(secret)
        # Longest first, so a form never leaves part of a longer one behind.
        ordered = sorted(forms, key=lambda form: (-len(form), form))
        self.longest = len(ordered[0]) if ordered else 0
        self._pattern = (
            re.compile("|".join(re.escape(form) for form in ordered), re.IGNORECASE)
            if ordered
            else None
        )

    @classmethod
    def for_credential(
        cls, credential: str, known_keys: frozenset[str] = CREDENTIAL_KEYS
    ) -> Redactor:
        """Build the redactor of a credential: the whole text and every part of it."""
        text = credential.strip()
        secrets = {credential, text}
        if text.startswith(("{", "[")):
            try:
                decoded = jsonlib.loads(text)
            except (ValueError, RecursionError):
                decoded = None
            secrets.update(credential_parts(decoded, known_keys))
        return cls(secrets)

    def scrub(self, text: str) -> str:
        """Return text with every occurrence of a secret replaced by [redacted]."""
        return text if self._pattern is None else self._pattern.sub(REDACTED, text)

    def scrub_error(self, error: QuotaError) -> QuotaError:
        """Return the same error with its message scrubbed."""
        return QuotaError(error.kind, self.scrub(error.message), error.retry_after_seconds)

    def scrub_quota(self, parsed: ParsedQuota) -> ParsedQuota:
        """Return the reading with its detail and window names scrubbed."""
        # Window names come from the payload (model ids, keys): an echo of the token
        # there would be stored and shown like any other name.
        windows = tuple(
            replace(
                w,
                name=self.scrub(w.name),
                model_scope=None if w.model_scope is None else self.scrub(w.model_scope),
            )
            for w in parsed.windows
        )
        return replace(parsed, detail=self.scrub(parsed.detail), windows=windows)


# --- strict readers for payload fields -------------------------------------------------


def unparseable(message: str) -> QuotaError:
    """Build the error for a payload of the wrong shape."""
    return QuotaError(ErrorKind.UNPARSEABLE, message)


def _json_type(value: object) -> str:
    """Name a decoded JSON value's type the way the payload spells it."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "a list"
    return "an object" if isinstance(value, dict) else f"a {type(value).__name__}"


def expect_object(value: object, where: str) -> dict[str, Any]:
    """Return value as a JSON object, or raise unparseable."""
    if not isinstance(value, dict):
        raise unparseable(f"{where} is {_json_type(value)}, expected an object")
    return value


def optional_object(container: Mapping[str, Any], key: str, where: str) -> dict[str, Any] | None:
    """Return container[key] as an object; None when missing or null."""
    value = container.get(key)
    return None if value is None else expect_object(value, f"{where}.{key}")


def optional_list(container: Mapping[str, Any], key: str, where: str) -> list[Any] | None:
    """Return container[key] as a list; None when missing or null."""
    value = container.get(key)
    if value is None:
        return None
    if not isinstance(value, list):
        raise unparseable(f"{where}.{key} is {_json_type(value)}, expected a list")
    return value


def optional_number(container: Mapping[str, Any], key: str, where: str) -> float | None:
    """Return container[key] as a finite float; None when missing or null."""
    value = container.get(key)
    if value is None:
        return None
    # bool is an int in Python but never a quantity in a payload.
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise unparseable(f"{where}.{key} is {_json_type(value)}, expected a number")
    number = float(value)
    if not math.isfinite(number):
        # Python's json module accepts NaN and Infinity, which no provider means.
        raise unparseable(f"{where}.{key} is not a finite number")
    return number


def optional_bool(container: Mapping[str, Any], key: str, where: str) -> bool | None:
    """Return container[key] as a bool; None when missing or null."""
    value = container.get(key)
    if value is None:
        return None
    if not isinstance(value, bool):
        raise unparseable(f"{where}.{key} is {_json_type(value)}, expected a boolean")
    return value


def optional_string(container: Mapping[str, Any], key: str, where: str) -> str | None:
    """Return container[key] as a str; None when missing or null."""
    value = container.get(key)
    if value is None:
        return None
    if not isinstance(value, str):
        raise unparseable(f"{where}.{key} is {_json_type(value)}, expected a string")
    return value


def optional_iso_instant(container: Mapping[str, Any], key: str, where: str) -> datetime | None:
    """Return container[key] read as an ISO 8601 instant or date; None when missing or null."""
    text = optional_string(container, key, where)
    if text is None:
        return None
    moment = parse_iso_instant(text)
    if moment is None:
        # Not quoted: the text is input (a payload, or the simulated adapter's credential).
        raise unparseable(f"{where}.{key} is not an ISO 8601 time")
    return moment


def optional_epoch(container: Mapping[str, Any], key: str, where: str) -> datetime | None:
    """Return container[key] read as Unix epoch seconds; None when missing or null."""
    seconds = optional_number(container, key, where)
    if seconds is None:
        return None
    moment = epoch_to_datetime(seconds)
    if moment is None:
        raise unparseable(f"{where}.{key} is not a usable epoch time")
    return moment


# --- credentials -----------------------------------------------------------------------


def invalid_credential(adapter: str, problem: str) -> QuotaError:
    """Build the error for a credential that is malformed for its adapter."""
    return QuotaError(ErrorKind.CREDENTIAL_INVALID, f"the {adapter} credential {problem}")


def parse_credential(
    credential: str,
    *,
    adapter: str,
    required: tuple[str, ...] = (),
    optional: tuple[str, ...] = (),
) -> dict[str, str]:
    """Read a bare token, or a JSON object with "access_token" plus the adapter's keys."""
    text = credential.strip()
    if not text:
        raise invalid_credential(adapter, "is empty")
    if not text.startswith("{"):
        if required:
            keys = ", ".join(("access_token", *required))
            raise invalid_credential(adapter, f"must be a JSON object with {keys}")
        fields = {"access_token": text}
    else:
        try:
            data = jsonlib.loads(text)
        except (ValueError, RecursionError):
            # "from None": the decode error holds the whole document, i.e. the secret.
            raise invalid_credential(adapter, "starts with '{' but is not valid JSON") from None
        if not isinstance(data, dict):
            raise invalid_credential(adapter, "must be a JSON object")
        fields = {}
        for key in ("access_token", *required, *optional):
            value = data.get(key)
            if value is None or value == "":
                if key == "access_token" or key in required:
                    raise invalid_credential(adapter, f"lacks {key!r}")
                continue
            if not isinstance(value, str):
                raise invalid_credential(adapter, f"has a non-string {key!r}")
            fields[key] = value
    if not _TOKEN.fullmatch(fields["access_token"]):
        raise invalid_credential(adapter, "holds a token with spaces or non-ASCII characters")
    return fields


# --- the registry entry ----------------------------------------------------------------


@dataclass(frozen=True)
class Adapter:
    """One registry entry: the provider's IO fetch beside its pure parser."""

    name: str
    default_url: str
    fetch: Callable[..., Any]
    parse: Callable[[Any, datetime], ParsedQuota]
    # The credential's field names: not secrets, so the redactor leaves them in messages.
    credential_keys: frozenset[str] = field(default=CREDENTIAL_KEYS)

    def poll(
        self, *, url: str, credential: str, client: httpx.Client, now: datetime
    ) -> ParsedQuota:
        """Fetch the usage payload and parse it; raises QuotaError on any failure.

        Whatever comes out (an error's message, a reading's detail and window names) has
        every part of the credential, in every common encoding, replaced by [redacted]:
        messages are stored, shown and logged, and the credential is write-only."""
        redactor = Redactor.for_credential(credential, self.credential_keys)
        try:
            payload = self.fetch(url=url, credential=credential, client=client)
        except QuotaError as error:
            raise redactor.scrub_error(error) from None
        except Exception as error:  # an adapter bug: its text may quote the request
            raise QuotaError(
                ErrorKind.TRANSPORT, f"the {self.name} fetch failed: {type(error).__name__}"
            ) from None
        try:
            parsed = self.parse(payload, now)
        except QuotaError as error:
            raise redactor.scrub_error(error) from None
        except Exception as error:  # an adapter bug: its text may quote the payload
            raise unparseable(f"the {self.name} parser failed: {type(error).__name__}") from None
        return redactor.scrub_quota(parsed)


def env_var_for(name: str) -> str:
    """Name the env var overriding an adapter's URL: "gemini-cli" -> "QUOTA_URL_GEMINI_CLI"."""
    return "QUOTA_URL_" + re.sub(r"[^A-Z0-9]", "_", name.upper())
