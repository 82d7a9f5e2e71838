"""`python manage.py simulate`: replay a traffic trace against simulated providers built
from the current catalog, prices, settings and connections, under four routing policies
(thrifty, subscription-only, cheapest-first, the original design), and write a table,
a CSV and an HTML report.

The shell loads and writes; the replay itself is the pure `ladder.simulator`. Plan
sizes: a plan connection polled through the `simulated` adapter is sized from its
config (`plan_size` thousands of tokens per 5-hour window, a weekly window of ten
times that, the phase `phase_seconds / window_seconds` of a window); any other plan
gets 1M tokens per 5 hours and 10M per week; a metered connection whose models are all
free gets a daily cap of 1,000 requests; everything else never runs out. The simulated
spend ledger starts empty, whatever the real ledger holds.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser

from ladder.core import CandidateIn
from ladder.services import simulations
from ladder.services.loading import registered_candidates
from ladder.simulator import scoped
from ladder.simulator.report import REPORTS_DIR_NAME, ReportContext, format_table, write_report
from ladder.simulator.results import Policy
from ladder.simulator.run import simulate_all
from ladder.simulator.staggered import compare, format_comparison
from ladder.simulator.trace import (
    Trace,
    TraceError,
    TrafficModel,
    default_selections,
    parse_trace_csv,
    synthetic_trace,
)
from ladder.simulator.world import Timing

DEFAULT_START = simulations.DEFAULT_START
DEFAULT_SEED = simulations.DEFAULT_SEED
DEFAULT_REQUESTS_PER_WEEKDAY = simulations.DEFAULT_REQUESTS_PER_WEEKDAY
ORIGINAL_CACHE_TTL_SECONDS = simulations.ORIGINAL_CACHE_TTL_SECONDS
PLAN_SIZING = simulations.PLAN_SIZING


def _start(value: str) -> datetime:
    try:
        start = datetime.fromisoformat(value)
    except ValueError:
        raise CommandError(f"--start {value!r} is not an ISO 8601 instant") from None
    return start.replace(tzinfo=UTC) if start.utcoffset() is None else start.astimezone(UTC)


class Command(BaseCommand):
    help = (
        "Replay a traffic trace (synthetic by default, or --trace FILE.csv) against "
        "simulated providers and compare routing policies; writes report.html and "
        "results.csv to --out and copies the report to var/reports/latest.html."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--trace",
            type=Path,
            help="a CSV trace: timestamp,provider,model,input_tokens,output_tokens (an "
            "empty provider puts a category, or nothing for any candidate, in model)",
        )
        parser.add_argument("--seed", type=int, default=DEFAULT_SEED, help="synthetic trace seed")
        parser.add_argument("--days", type=int, default=7, help="synthetic trace length")
        parser.add_argument(
            "--requests-per-weekday",
            type=int,
            default=DEFAULT_REQUESTS_PER_WEEKDAY,
            help="synthetic trace volume (weekends carry 35 %%)",
        )
        parser.add_argument(
            "--start",
            type=_start,
            default=DEFAULT_START,
            help="synthetic trace start (ISO 8601, UTC if no offset)",
        )
        parser.add_argument(
            "--staggered",
            action="store_true",
            help="replay the shipped staggered-reset scenario instead (three plan seats "
            "resetting on different days, its own world and trace): the allowlist's order "
            "against soonest reset first, with and without conversation keys; prints the "
            "comparison and writes nothing",
        )
        parser.add_argument(
            "--scoped",
            action="store_true",
            help="replay the shipped scoped-window scenario instead (one plan seat whose "
            "Opus weekly cap runs out midweek, and the same seat with extra usage on): "
            "the single-window rule against windows scoped to a model, and billing "
            "evidence ignored against heeded; prints the comparison and writes nothing",
        )
        parser.add_argument(
            "--out",
            type=Path,
            default=None,
            help="directory for report.html and results.csv (default var/reports/)",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        started = time.perf_counter()
        if options["staggered"]:
            self.stdout.write(
                "Staggered resets: three plan seats (weekly windows resetting Saturday, "
                "Thursday, Tuesday, listed in that order) and a metered key, 4 weeks of "
                "conversations (seed 36), auto/thrifty."
            )
            self.stdout.write(format_comparison(compare()))
            self.stdout.write(f"Simulated in {time.perf_counter() - started:.1f} s.")
            return
        if options["scoped"]:
            self.stdout.write(
                "Windows scoped to a model: one Claude Max seat (five-hour, weekly and Opus "
                "weekly windows) and a metered key, 2 weeks of Opus and Sonnet traffic with "
                "a daily agent run of Opus (seed 32)."
            )
            self.stdout.write(scoped.format_comparison(scoped.compare()))
            self.stdout.write(f"Simulated in {time.perf_counter() - started:.1f} s.")
            return
        candidates = registered_candidates()
        if not candidates:
            raise CommandError(
                "No candidates are registered: run `.venv/bin/python manage.py seed_demo` or "
                "register some."
            )
        trace = self._trace(options, candidates)
        try:
            loaded = simulations.load_world(simulations.anchor_of(trace))
        except simulations.SimulationError as error:
            raise CommandError(str(error)) from None
        world, connections, config, timing = (
            loaded.world,
            loaded.connections,
            loaded.config,
            loaded.timing,
        )
        self.stdout.write(
            f"Replaying {len(trace.requests):,} requests ({trace.source} trace, "
            f"{trace.hours / 24:.1f} days) against {len(connections)} connections and "
            f"{len(candidates)} candidates, under {len(Policy)} policies."
        )

        def progress(policy: Policy, day: int, days: int) -> None:
            # One line per policy, a day number as each simulated day starts.
            if day == 1:
                self.stdout.write(f"  {policy.value}: day", ending="")
            self.stdout.write(f" {day}", ending="\n" if day == days else "")
            self.stdout.flush()

        results = simulate_all(world, trace, timing=timing, on_progress=progress)
        elapsed = time.perf_counter() - started
        self.stdout.write("")
        self.stdout.write(format_table(results))
        self.stdout.write("")
        reports_dir = Path(settings.VAR_DIR) / REPORTS_DIR_NAME
        out_dir = options["out"] or reports_dir
        context = ReportContext(
            trace=trace,
            connections=connections,
            config=config,
            parameters=self._parameters(options, trace, timing, candidates),
        )
        try:
            paths = write_report(results, context, out_dir, reports_dir)
        except OSError as error:
            raise CommandError(f"Cannot write the report: {error}") from None
        self.stdout.write(f"Wrote {paths.html}, {paths.csv} and {paths.latest}.")
        self.stdout.write(f"Simulated in {elapsed:.1f} s.")

    def _trace(self, options: dict[str, Any], candidates: list[CandidateIn]) -> Trace:
        path: Path | None = options["trace"]
        if path is not None:
            try:
                text = path.read_text(encoding="utf-8")
            except (OSError, UnicodeDecodeError) as error:
                raise CommandError(f"Cannot read the trace {path}: {error}") from None
            try:
                return parse_trace_csv(text, candidates)
            except TraceError as error:
                raise CommandError(f"{path}: {error}") from None
        try:
            model = TrafficModel(
                days=options["days"], requests_per_weekday=options["requests_per_weekday"]
            )
        except ValueError as error:
            raise CommandError(str(error)) from None
        return synthetic_trace(
            options["start"], default_selections(candidates), model, seed=options["seed"]
        )

    @staticmethod
    def _parameters(
        options: dict[str, Any], trace: Trace, timing: Timing, candidates: list[CandidateIn]
    ) -> dict[str, str]:
        if options["trace"] is not None:
            source = {"trace": str(options["trace"])}
        else:
            source = {
                "synthetic trace": simulations.synthetic_parameters(
                    seed=options["seed"],
                    days=options["days"],
                    start=options["start"],
                    per_weekday=options["requests_per_weekday"],
                )
            }
        return simulations.report_parameters(source, trace, timing, candidates)
