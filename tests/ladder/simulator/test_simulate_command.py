"""`manage.py simulate` end to end on a small seeded database."""

from __future__ import annotations

import csv
from io import StringIO
from pathlib import Path
from typing import Any

import pytest
from django.core.management import CommandError, call_command

from ladder.simulator.report import CSV_COLUMNS, TABLE_HEADER, latest_report_path
from ladder.simulator.results import Policy
from tests.ladder.factories import make_candidate, make_connection

pytestmark = pytest.mark.django_db


@pytest.fixture
def var_dir(settings: Any, tmp_path: Path) -> Path:
    """A scratch VAR_DIR, so the latest report never lands in the real var/."""
    settings.VAR_DIR = tmp_path / "var"
    return Path(settings.VAR_DIR)


def _run(*args: str) -> str:
    out = StringIO()
    call_command("simulate", *args, stdout=out)
    return out.getvalue()


def test_simulate_on_the_demo_world_writes_the_table_csv_and_html(
    var_dir: Path, tmp_path: Path
) -> None:
    # given the demo world
    call_command("seed_demo", stdout=StringIO())
    out_dir = tmp_path / "report"
    # when one synthetic day is simulated
    output = _run("--days", "1", "--requests-per-weekday", "400", "--out", str(out_dir))
    # then the table has its header and a row per policy, after one progress line each
    lines = output.splitlines()
    header = next(line for line in lines if line.startswith("policy "))
    for column in TABLE_HEADER:
        assert column in header
    for policy in Policy:
        assert f"  {policy.value}: day 1\n" in output
        assert any(line.startswith(f"{policy.value} ") for line in lines)
    # the CSV has its columns and one row per policy
    with (out_dir / "results.csv").open(newline="") as handle:
        rows = list(csv.DictReader(handle))
    assert tuple(rows[0]) == CSV_COLUMNS
    assert [row["policy"] for row in rows] == [p.value for p in Policy]
    assert all(int(row["requests"]) == int(rows[0]["requests"]) > 0 for row in rows)
    # the HTML carries both charts, and the dashboard's latest copy is the same report
    html = (out_dir / "report.html").read_text()
    assert html.count("class=sim-chart") == 1 + len(Policy)
    assert "claude-max-2" in html  # the world table lists the connections
    assert latest_report_path() == var_dir / "reports" / "latest.html"
    assert (var_dir / "reports" / "latest.html").read_text() == html


def test_simulate_writes_to_var_reports_by_default(var_dir: Path) -> None:
    # given the demo world, when simulated without --out
    call_command("seed_demo", stdout=StringIO())
    _run("--days", "1", "--requests-per-weekday", "50")
    # then the report and CSV sit next to latest.html
    names = sorted(path.name for path in (var_dir / "reports").iterdir())
    assert names == ["latest.html", "latest.json", "report.html", "report.json", "results.csv"]


def test_simulate_replays_a_csv_trace(var_dir: Path, tmp_path: Path) -> None:
    # given one plan, one paid key and a three-request trace naming both ways
    make_connection("plan-1", provider="claude", auth_type="oauth")
    make_connection("key-1", provider="openai", auth_type="apikey")
    make_candidate("claude", "sonnet", connection_id="plan-1", categories=("coding",))
    make_candidate("openai", "mini", connection_id="key-1", categories=("coding",), priority=1)
    trace = tmp_path / "trace.csv"
    trace.write_text(
        "timestamp,provider,model,input_tokens,output_tokens\n"
        "2025-06-02T09:00:00Z,claude,sonnet,1000,100\n"
        "2025-06-02T09:01:00Z,,coding,1000,100\n"
        "2025-06-02T09:02:00Z,openai,mini,1000,100\n"
    )
    # when replayed
    _run("--trace", str(trace), "--out", str(tmp_path / "out"))
    # then thrifty served two on the plan and billed the one naming the key (uncurated
    # openai is metered; its unpriced model is premium)
    with (tmp_path / "out" / "results.csv").open(newline="") as handle:
        thrifty = next(csv.DictReader(handle))
    assert (thrifty["policy"], thrifty["requests"], thrifty["refused"]) == ("thrifty", "3", "0")
    assert (thrifty["served_subscription"], thrifty["served_premium"]) == ("2", "1")
    assert thrifty["paid_spend_usd"] == "0.00650000"  # 1000 x $5 + 100 x $15 per M


def test_simulate_refuses_a_bad_trace_row_and_writes_nothing(var_dir: Path, tmp_path: Path) -> None:
    # given a trace whose third line has a bad token count
    call_command("seed_demo", stdout=StringIO())
    trace = tmp_path / "trace.csv"
    trace.write_text(
        "timestamp,provider,model,input_tokens,output_tokens\n"
        "2025-06-02T09:00:00Z,,coding,1000,100\n"
        "2025-06-02T09:01:00Z,,coding,many,100\n"
    )
    out_dir = tmp_path / "out"
    # when replayed, then the error names the file and line, and nothing is written
    with pytest.raises(CommandError, match=r"trace\.csv: line 3: input_tokens 'many'"):
        _run("--trace", str(trace), "--out", str(out_dir))
    assert not out_dir.exists()
    assert latest_report_path() is None


def test_simulate_refuses_a_missing_trace_file(var_dir: Path, tmp_path: Path) -> None:
    call_command("seed_demo", stdout=StringIO())
    with pytest.raises(CommandError, match="Cannot read the trace"):
        _run("--trace", str(tmp_path / "absent.csv"))


def test_simulate_needs_candidates(var_dir: Path) -> None:
    # given an empty world, when simulated, then it says what to do and writes nothing
    with pytest.raises(CommandError, match="seed_demo"):
        _run("--days", "1")
    assert latest_report_path() is None


def test_simulate_refuses_a_bad_simulated_config(var_dir: Path) -> None:
    # given a simulated plan whose config the adapter would refuse
    make_connection("plan-1", quota_source="simulated", credential='{"plan_sise": 5}')
    make_candidate(connection_id="plan-1")
    # when simulated, then the connection and the problem are named
    with pytest.raises(CommandError, match="plan-1: the simulated config has unknown keys"):
        _run("--days", "1")


def test_simulate_staggered_prints_the_comparison_and_writes_nothing(
    var_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from datetime import timedelta

    from ladder.management.commands import simulate as command
    from ladder.simulator import staggered

    # One week of the scenario's traffic, so the command's own path stays quick here (the
    # full four weeks are pinned in test_staggered.py).
    week = staggered.staggered_trace(weeks=1)
    monkeypatch.setattr(command, "compare", lambda: staggered.compare(trace=week))

    output = _run("--staggered")

    lines = output.splitlines()
    assert lines[0].startswith("Staggered resets: three plan seats")
    assert [line.split("  ")[0] for line in lines[3:7]] == [
        "allowlist order, no keys",
        "soonest reset first, no keys",
        "allowlist order, keys",
        "soonest reset first, keys",
    ]
    assert lines[7].startswith("soonest reset first leaves ")
    assert not var_dir.exists()
    assert week.end - week.start == timedelta(days=7)


def test_simulate_scoped_prints_the_comparison_and_writes_nothing(
    var_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from ladder.simulator import scoped

    # One week of the scenario's traffic (the two weeks are pinned in test_scoped.py).
    week = scoped.scoped_trace(weeks=1)
    real_compare = scoped.compare
    monkeypatch.setattr(scoped, "compare", lambda: real_compare(trace=week))

    output = _run("--scoped")

    lines = output.splitlines()
    assert lines[0].startswith("Windows scoped to a model: one Claude Max seat")
    assert [line.split("  ")[0] for line in lines[3:8]] == [
        "thrifty, every window binds the seat",
        "thrifty, windows scoped to a model",
        "plans only, can meter, evidence ignored",
        "plans only, can meter, evidence heeded",
        "thrifty, can meter, evidence heeded",
    ]
    assert lines[8].startswith("the single-window rule paid ")
    assert lines[9].startswith("with extra usage on, plans only billed ")
    assert not var_dir.exists()
