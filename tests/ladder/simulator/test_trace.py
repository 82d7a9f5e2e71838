"""The simulator's traces: the CSV parser and the synthetic trace. No database."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from ladder.core import CandidateIn
from ladder.simulator.trace import (
    Request,
    Selection,
    TraceError,
    TrafficModel,
    default_selections,
    parse_trace_csv,
    synthetic_trace,
)
from tests.ladder.simulator.helpers import (
    CANDIDATES,
    T0,
)

# --------------------------------------------------------------------------- CSV traces

HEADER = "timestamp,provider,model,input_tokens,output_tokens\n"


def test_parse_trace_csv_reads_models_categories_and_the_flat_id_in_time_order() -> None:
    # given rows out of order: a named model, a category, any candidate (naive = UTC)
    text = (
        HEADER
        + "2025-06-02T10:00:05Z,,coding,2000,300\n"
        + "2025-06-02T10:00:00+02:00,claude,sonnet,1000,500\n"
        + "\n"
        + "2025-06-02T11:00:00,,,10,1\n"
    )
    # when parsed
    parsed = parse_trace_csv(text, CANDIDATES)
    # then
    assert parsed.requests == (
        Request(
            datetime(2025, 6, 2, 8, tzinfo=UTC), Selection(None, "claude", "sonnet"), 1000, 500
        ),
        Request(datetime(2025, 6, 2, 10, 0, 5, tzinfo=UTC), Selection("coding"), 2000, 300),
        Request(datetime(2025, 6, 2, 11, tzinfo=UTC), Selection(), 10, 1),
    )
    assert (parsed.start, parsed.end, parsed.source) == (
        datetime(2025, 6, 2, 8, tzinfo=UTC),
        datetime(2025, 6, 2, 11, tzinfo=UTC),
        "csv",
    )


@pytest.mark.parametrize(
    ("text", "line", "message"),
    [
        pytest.param("", 1, "the file is empty", id="empty"),
        pytest.param(HEADER, 1, "no requests", id="header-only"),
        pytest.param("timestamp,model\n", 1, "lacks provider, input_tokens", id="columns"),
        pytest.param(HEADER + "yesterday,,,1,1\n", 2, "not an ISO 8601", id="timestamp"),
        pytest.param(
            HEADER + "2025-06-02T10:00:00Z,,,1,1\n2025-06-02T10:00:00Z,,,-5,1\n",
            3,
            "input_tokens is -5",
            id="negative",
        ),
        pytest.param(HEADER + "2025-06-02T10:00:00Z,,,1,1.5\n", 2, "not a whole", id="float"),
        pytest.param(HEADER + "2025-06-02T10:00:00Z,,,1\n", 2, "expected 5 columns", id="short"),
        pytest.param(
            HEADER + "2025-06-02T10:00:00Z,openai,gpt-9,1,1\n", 2, "openai/gpt-9", id="model"
        ),
        pytest.param(
            HEADER + "2025-06-02T10:00:00Z,,poetry,1,1\n", 2, "known: coding", id="category"
        ),
        pytest.param(
            HEADER + "2025-06-02T10:00:00Z,openai,,1,1\n", 2, "without a model", id="no-model"
        ),
    ],
)
def test_parse_trace_csv_names_the_bad_line(text: str, line: int, message: str) -> None:
    # given a bad file, when parsed, then the error names the line and the problem
    with pytest.raises(TraceError) as caught:
        parse_trace_csv(text, CANDIDATES)
    assert caught.value.line == line
    assert message in str(caught.value)
    assert str(caught.value).startswith(f"line {line}: ")


# --------------------------------------------------------------------------- synthetic


def test_synthetic_trace_is_deterministic_for_a_seed() -> None:
    # given the same inputs, when generated twice, then the traces are equal
    mix = default_selections(CANDIDATES)
    model = TrafficModel(days=2, requests_per_weekday=500)
    first = synthetic_trace(T0, mix, model, seed=3)
    assert first == synthetic_trace(T0, mix, model, seed=3)
    assert first != synthetic_trace(T0, mix, model, seed=4)


def test_synthetic_trace_is_diurnal_weekly_and_realistically_sized() -> None:
    # given a week at 4000 requests per weekday
    result = synthetic_trace(T0, default_selections(CANDIDATES), TrafficModel(), seed=8)
    requests = result.requests
    # then the volume is about 5 x 4000 + 2 x 1400, in order, within the week
    assert 21_500 < len(requests) < 24_000
    assert [r.at for r in requests] == sorted(r.at for r in requests)
    assert (result.start, result.end) == (T0, T0 + 7 * timedelta(days=1))
    # afternoons are far busier than nights, weekdays than weekends
    by_hour = [0] * 24
    for r in requests:
        by_hour[r.at.hour] += 1
    assert by_hour[14] > 10 * by_hour[3]
    saturday = sum(1 for r in requests if r.at.weekday() == 5)
    monday = sum(1 for r in requests if r.at.weekday() == 0)
    assert saturday < monday / 2
    # token sizes: inputs mostly 2k-20k, outputs mostly 200-2k
    inputs = sorted(r.input_tokens for r in requests)
    outputs = sorted(r.output_tokens for r in requests)
    decile = len(requests) // 10
    assert (inputs[decile] > 2_000, inputs[-decile] < 20_000) == (True, True)
    assert (outputs[decile] > 200, outputs[-decile] < 2_000) == (True, True)


def test_default_selections_weight_categories_by_candidate_count() -> None:
    # given two coding candidates (one also chat), then coding weighs twice chat
    candidates = (*CANDIDATES, CandidateIn(3, "x", "y", ("chat",), "k", None))
    assert default_selections(candidates) == (
        (Selection("chat"), 1.0),
        (Selection("coding"), 2.0),
    )
    assert default_selections([replace(CANDIDATES[0], categories=())]) == ((Selection(), 1.0),)
