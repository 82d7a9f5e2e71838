"""Traces: the requests a run replays, parsed from an operator's CSV or generated
synthetically (deterministic for a seed)."""

from __future__ import annotations

import csv
import io
import math
import random
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Final

from ladder.core import (
    CandidateIn,
)

# --------------------------------------------------------------------------- the trace


@dataclass(frozen=True, slots=True)
class Selection:
    """What a request asks for: a named model, a category, or any candidate (flat id)."""

    category: str | None = None
    provider: str | None = None
    model: str | None = None

    def __post_init__(self) -> None:
        if (self.provider is None) != (self.model is None):
            raise ValueError("a named model needs both provider and model")
        if self.model is not None and self.category is not None:
            raise ValueError("a request names a model or a category, not both")

    @property
    def label(self) -> str:
        """How the selection reads in a report: `claude/claude-sonnet-4-5`, `coding`, `any`."""
        if self.model is not None:
            return f"{self.provider}/{self.model}"
        return self.category or "any"

    def matches(self, candidate: CandidateIn) -> bool:
        """Whether a candidate can serve this selection."""
        if self.model is not None:
            return candidate.provider == self.provider and candidate.model == self.model
        return self.category is None or self.category in candidate.categories


@dataclass(frozen=True, slots=True)
class Request:
    """One request of a trace."""

    at: datetime
    selection: Selection
    input_tokens: int
    output_tokens: int
    # The conversation the request is a turn of (None: not known), for stickiness and
    # switches per conversation.
    conversation: int | None = None


@dataclass(frozen=True, slots=True)
class Trace:
    """Requests in time order over [start, end]; `source` says where they came from."""

    start: datetime
    end: datetime
    requests: tuple[Request, ...]
    source: str

    @property
    def hours(self) -> float:
        """The span of the trace in hours."""
        return (self.end - self.start).total_seconds() / 3600.0


class TraceError(ValueError):
    """A trace file row that cannot be simulated; `line` is 1-based (the header is 1)."""

    def __init__(self, line: int, message: str) -> None:
        self.line = line
        self.message = message
        super().__init__(f"line {line}: {message}")


TRACE_COLUMNS: Final = ("timestamp", "provider", "model", "input_tokens", "output_tokens")


def parse_trace_csv(text: str, candidates: Sequence[CandidateIn]) -> Trace:
    """Parse an operator's CSV trace; TraceError names the first bad line.

    Columns (a header row, any order, extra columns ignored): `timestamp` (ISO 8601; no
    offset means UTC), `provider`, `model`, `input_tokens`, `output_tokens`. A row with a
    provider names a model that some candidate serves; a row with an empty provider
    puts a category in `model` (empty: any candidate, the flat auto id). Rows are
    sorted by timestamp (stable).
    """
    reader = csv.reader(io.StringIO(text))
    header = next(reader, None)
    if header is None:
        raise TraceError(1, "the file is empty: expected a header row " + ",".join(TRACE_COLUMNS))
    names = [name.strip().lower() for name in header]
    missing = [column for column in TRACE_COLUMNS if column not in names]
    if missing:
        raise TraceError(
            1,
            f"the header lacks {', '.join(missing)}; expected the columns "
            + ",".join(TRACE_COLUMNS),
        )
    index = {column: names.index(column) for column in TRACE_COLUMNS}
    models = {(c.provider, c.model) for c in candidates}
    categories = sorted({category for c in candidates for category in c.categories})
    requests: list[Request] = []
    for row in reader:
        line = reader.line_num
        if not any(cell.strip() for cell in row):
            continue
        if len(row) < len(names):
            raise TraceError(line, f"expected {len(names)} columns, found {len(row)}")
        cell = {column: row[position].strip() for column, position in index.items()}
        at = _parse_instant(cell["timestamp"], line)
        provider, model = cell["provider"], cell["model"]
        if provider:
            if not model:
                raise TraceError(line, f"provider {provider!r} is given without a model")
            if (provider, model) not in models:
                raise TraceError(line, f"no candidate serves the model {provider}/{model}")
            selection = Selection(provider=provider, model=model)
        elif model:
            if model not in categories:
                known = ", ".join(categories) or "none"
                raise TraceError(line, f"no candidate has the category {model!r} (known: {known})")
            selection = Selection(category=model)
        else:
            selection = Selection()
        requests.append(
            Request(
                at=at,
                selection=selection,
                input_tokens=_parse_tokens(cell["input_tokens"], "input_tokens", line),
                output_tokens=_parse_tokens(cell["output_tokens"], "output_tokens", line),
            )
        )
    if not requests:
        raise TraceError(1, "the file has a header but no requests")
    requests.sort(key=lambda request: request.at)
    return Trace(requests[0].at, requests[-1].at, tuple(requests), source="csv")


def _parse_instant(value: str, line: int) -> datetime:
    try:
        at = datetime.fromisoformat(value)
    except ValueError:
        raise TraceError(line, f"timestamp {value!r} is not an ISO 8601 instant") from None
    if at.utcoffset() is None:
        return at.replace(tzinfo=UTC)
    return at.astimezone(UTC)


def _parse_tokens(value: str, column: str, line: int) -> int:
    try:
        tokens = int(value)
    except ValueError:
        raise TraceError(line, f"{column} {value!r} is not a whole number") from None
    if tokens < 0:
        raise TraceError(line, f"{column} is {tokens}, must be >= 0")
    return tokens


# Requests per hour of the day (UTC), relative: a team working roughly 08:00-18:00
# with a lunch dip, and a thin tail of batch jobs overnight.
HOURLY_PROFILE: Final = (
    0.10, 0.07, 0.05, 0.05, 0.05, 0.07, 0.15, 0.35, 0.70, 0.95, 1.00, 0.95,
    0.75, 0.85, 1.00, 1.00, 0.90, 0.70, 0.45, 0.35, 0.30, 0.25, 0.18, 0.13,
)  # fmt: skip


@dataclass(frozen=True, slots=True)
class TrafficModel:
    """The synthetic trace: a diurnal Poisson arrival rate and lognormal token sizes."""

    days: int = 7
    requests_per_weekday: int = 4000
    weekend_factor: float = 0.35
    input_median_tokens: int = 6000
    output_median_tokens: int = 600
    # Lognormal spread: sigma 0.6 puts 90 % of inputs within about 2.2k-16k tokens
    # around the 6k median, and outputs within about 220-1.6k around 600.
    token_sigma: float = 0.6
    max_tokens: int = 200_000

    def __post_init__(self) -> None:
        if self.days < 1:
            raise ValueError(f"days must be >= 1, got {self.days}")
        if self.requests_per_weekday < 0:
            raise ValueError(f"requests_per_weekday must be >= 0, got {self.requests_per_weekday}")
        if not self.weekend_factor >= 0:
            raise ValueError(f"weekend_factor must be >= 0, got {self.weekend_factor}")


def default_selections(candidates: Sequence[CandidateIn]) -> tuple[tuple[Selection, float], ...]:
    """The synthetic traffic mix: each category weighted by how many candidates list it
    (the flat id alone when no candidate has a category)."""
    counts: dict[str, int] = {}
    for candidate in candidates:
        for category in candidate.categories:
            counts[category] = counts.get(category, 0) + 1
    if not counts:
        return ((Selection(), 1.0),)
    return tuple((Selection(category=name), float(counts[name])) for name in sorted(counts))


def synthetic_trace(
    start: datetime,
    selections: Sequence[tuple[Selection, float]],
    model: TrafficModel,
    seed: int,
) -> Trace:
    """A deterministic synthetic trace: the same inputs and seed give the same requests."""
    if not selections or sum(weight for _, weight in selections) <= 0:
        raise ValueError("the traffic mix needs at least one selection with a positive weight")
    rng = random.Random(seed)
    choices = [selection for selection, _ in selections]
    cumulative: list[float] = []
    total = 0.0
    for _, weight in selections:
        total += weight
        cumulative.append(total)
    profile_sum = sum(HOURLY_PROFILE)
    requests: list[Request] = []
    hour = timedelta(hours=1)
    for day in range(model.days):
        day_start = start + timedelta(days=day)
        day_factor = model.weekend_factor if day_start.weekday() >= 5 else 1.0
        for hour_index, weight in enumerate(HOURLY_PROFILE):
            hour_start = day_start + hour * hour_index
            per_second = model.requests_per_weekday * day_factor * weight / profile_sum / 3600.0
            if per_second <= 0:
                continue
            # A homogeneous Poisson process within the hour: exponential gaps.
            offset = rng.expovariate(per_second)
            while offset < 3600.0:
                selection = choices[_bisect(cumulative, rng.random() * total)]
                requests.append(
                    Request(
                        at=hour_start + timedelta(seconds=round(offset, 3)),
                        selection=selection,
                        input_tokens=_lognormal(rng, model.input_median_tokens, model),
                        output_tokens=_lognormal(rng, model.output_median_tokens, model),
                    )
                )
                offset += rng.expovariate(per_second)
    end = start + timedelta(days=model.days)
    return Trace(start, end, tuple(requests), source="synthetic")


def _bisect(cumulative: Sequence[float], value: float) -> int:
    low, high = 0, len(cumulative) - 1
    while low < high:
        middle = (low + high) // 2
        if cumulative[middle] <= value:
            low = middle + 1
        else:
            high = middle
    return low


def _lognormal(rng: random.Random, median: int, model: TrafficModel) -> int:
    value = rng.lognormvariate(math.log(median), model.token_sigma)
    return max(1, min(model.max_tokens, round(value)))
