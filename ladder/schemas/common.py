"""What every group of the ladder API's schemas shares (spec/api.md "Conventions"): the
connection id, short texts and names, percents, the one type of a time in a write body,
the rungs."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    AwareDatetime,
    BeforeValidator,
    Field,
    StringConstraints,
)

from ladder.models import CONNECTION_ID_PATTERN

CONNECTION_ID_REGEX = CONNECTION_ID_PATTERN  # not `.` or `..` (ladder/models/connections.py)
ConnectionIdStr = Annotated[str, StringConstraints(pattern=CONNECTION_ID_REGEX)]
ShortText = Annotated[str, StringConstraints(max_length=200, pattern=r"^[^\x00]*$")]
NameStr = Annotated[
    str,
    StringConstraints(strip_whitespace=True, min_length=1, max_length=64, pattern=r"^[^\x00]*$"),
]
CategoryStr = Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9._-]{1,64}$")]
# Numbers are strict too: a JSON boolean or string is never taken for a number (lax
# parsing would store `"remaining_percent": true` as 1 %). JSON integers are accepted.
Percent = Annotated[float, Field(strict=True, ge=0, le=100, allow_inf_nan=False)]


def _to_utc(value: datetime) -> datetime:
    # The server stores and returns UTC. Converting here also refuses instants that
    # exist only with their offset (year 1 at +05:00) and offsets the database refuses
    # (PostgreSQL allows at most 15:59, Python 23:59): a 422, never a 500.
    try:
        return value.astimezone(UTC)
    except OverflowError:
        raise ValueError("the instant is out of range once converted to UTC") from None


# An ISO 8601 date and time of day: what every time in a body must start with. Pydantic
# alone would read "1796114593000" or "-1" as a Unix timestamp (seconds or milliseconds).
_ISO_DATE_TIME = re.compile(r"\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}")
TIME_FORMAT_MESSAGE = (
    "expected an ISO 8601 time with an offset, such as 2026-11-29T12:00:00Z "
    "(a number or a string of digits is not a time)"
)


def _time_text(value: Any) -> Any:
    # Times are ISO 8601 text with an offset (api.md "Conventions"): a JSON number, or a
    # string of digits, is never taken for a Unix time. The offset is AwareDatetime's.
    if isinstance(value, datetime):
        return value
    if not isinstance(value, str) or not _ISO_DATE_TIME.match(value):
        raise ValueError(TIME_FORMAT_MESSAGE)
    return value


# The one type of every time in an API write body.
UtcDatetime = Annotated[AwareDatetime, BeforeValidator(_time_text), AfterValidator(_to_utc)]
RungLiteral = Literal["subscription", "keyless", "free", "cheap", "premium"]
