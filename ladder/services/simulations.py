"""What-if simulations: the world built from the current catalog, prices, settings,
candidates and connections (shared by `manage.py simulate` and the dashboard), and the
dashboard's runs: started here, run by a Celery worker, their state and progress kept
in `SimulationRun` rows the What-if page polls.

One run at a time: a second start while one is queued or running is refused
(`SimulationBusy`). A worker that died mid-run leaves a run that no longer reports
progress; after `STALE_AFTER` without a word it is marked failed, and a new run may
start."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Final

from django.conf import settings
from django.db import IntegrityError, transaction
from django.utils import timezone

from billing import services as billing_services
from ladder.core import CandidateIn, LadderConfig
from ladder.crypto import CredentialDecryptError, CredentialKeyMissing, decrypt_credential
from ladder.models import Connection, SimulationRun
from ladder.services.config import load_config
from ladder.services.loading import registered_candidates
from ladder.simulator.report import ReportContext, report_context
from ladder.simulator.results import ALL_POLICIES, Policy
from ladder.simulator.run import simulate_all
from ladder.simulator.trace import Trace, TrafficModel, default_selections, synthetic_trace
from ladder.simulator.world import (
    DEFAULT_PLAN_TOKENS_PER_FIVE_HOURS,
    FREE_TIER_REQUESTS_PER_DAY,
    SIMULATED_QUOTA_SOURCE,
    WEEKLY_WINDOWS_PER_WEEK,
    RegisteredConnection,
    SimConnection,
    Timing,
    World,
    simulated_connections,
)

logger = logging.getLogger(__name__)

# A fixed Monday, so the default trace (and the committed report) is reproducible.
DEFAULT_START: Final = datetime(2025, 6, 2, tzinfo=UTC)
DEFAULT_SEED: Final = 8
DEFAULT_DAYS: Final = 7
DEFAULT_REQUESTS_PER_WEEKDAY: Final = TrafficModel().requests_per_weekday
# The original design's quota cache (ladder.md: a reset noticed only after this TTL).
ORIGINAL_CACHE_TTL_SECONDS: Final = 180.0
PLAN_SIZING: Final = (
    "a simulated plan's plan_size is read as thousands of tokens per 5-hour window "
    "(phase: phase_seconds / window_seconds of a window), any other plan "
    f"{DEFAULT_PLAN_TOKENS_PER_FIVE_HOURS:,} tokens; weekly windows hold "
    f"{WEEKLY_WINDOWS_PER_WEEK} times the 5-hour size; a metered connection serving only "
    f"free models has a daily cap of {FREE_TIER_REQUESTS_PER_DAY:,} requests; other "
    "connections never run out"
)
# What a run from the dashboard replays: the default week (tests make it shorter).
DASHBOARD_DAYS = DEFAULT_DAYS
DASHBOARD_REQUESTS_PER_WEEKDAY = DEFAULT_REQUESTS_PER_WEEKDAY
# Runs keep their report (some 100 kB of chart points each) for the newest few only.
REPORTS_KEPT: Final = 10
# Longer than the task's hard time limit: an active run silent for this long is dead.
STALE_AFTER: Final = timedelta(minutes=10)
# The report shipped in the repository (`manage.py simulate --out docs/simulation` on
# the demo world), shown until a simulation runs on this installation.
SHIPPED_REPORT: Final = Path(settings.BASE_DIR) / "docs" / "simulation" / "report.json"
REPORT_JSON_NAME: Final = "report.json"
LATEST_JSON_NAME: Final = "latest.json"


class SimulationError(ValueError):
    """The simulation cannot run on this installation's data (said in words)."""


class SimulationBusy(Exception):
    """Another run is queued or running."""

    def __init__(self, run: SimulationRun) -> None:
        super().__init__(f"Simulation {run.pk} is {run.state}.")
        self.run = run


# --- the world ----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class SimulationWorld:
    """What a replay needs from the database, loaded once."""

    world: World
    connections: tuple[SimConnection, ...]
    candidates: tuple[CandidateIn, ...]
    config: LadderConfig
    timing: Timing


def _simulated_config(row: Connection) -> object | None:
    """The decrypted JSON config of a plan polled through the simulated adapter."""
    if row.quota_source != SIMULATED_QUOTA_SOURCE or not row.credential_ciphertext:
        return None
    try:
        plaintext = decrypt_credential(row.credential_ciphertext)
    except (CredentialKeyMissing, CredentialDecryptError) as error:
        raise SimulationError(
            f"Cannot read the simulated config of {row.connection_id}: {error}"
        ) from None
    if not plaintext.strip():
        return None
    try:
        return json.loads(plaintext)
    except ValueError:
        raise SimulationError(f"The simulated config of {row.connection_id} is not JSON.") from None


def load_world(anchor: datetime) -> SimulationWorld:
    """The simulated world of the current data, plan windows restarting on a grid
    anchored at `anchor`; SimulationError when no candidate is registered."""
    config = load_config()
    catalog = billing_services.load_catalog()
    prices = billing_services.load_price_book()
    candidates = registered_candidates()
    if not candidates:
        raise SimulationError(
            "No candidates are registered, so there is nothing to route: add candidates "
            "(or run `.venv/bin/python manage.py seed_demo` for the demo world) first."
        )
    registered = [
        RegisteredConnection(
            connection_id=row.connection_id,
            provider=row.provider,
            auth_type=row.auth_type,
            billing=catalog.classify(row.provider, row.auth_type),
            is_active=row.is_active,
            quota_source=row.quota_source,
            simulated_config=_simulated_config(row),
        )
        for row in Connection.objects.order_by("connection_id")
    ]
    try:
        connections = simulated_connections(registered, candidates, prices, config, anchor)
    except ValueError as error:
        raise SimulationError(str(error)) from None
    timing = Timing(
        refresh_interval_seconds=float(settings.QUOTA_REFRESH_INTERVAL_SECONDS),
        beat_seconds=float(settings.QUOTA_BEAT_SECONDS),
        reset_grace_seconds=float(settings.QUOTA_RESET_GRACE_SECONDS),
        original_cache_ttl_seconds=ORIGINAL_CACHE_TTL_SECONDS,
    )
    world = World(connections, tuple(candidates), prices, config)
    return SimulationWorld(world, tuple(connections), tuple(candidates), config, timing)


def anchor_of(trace: Trace) -> datetime:
    """Plan windows restart on a grid anchored at midnight UTC of the trace's first day."""
    return trace.start.replace(hour=0, minute=0, second=0, microsecond=0)


def synthetic_parameters(*, seed: int, days: int, start: datetime, per_weekday: int) -> str:
    """The report's line on a synthetic trace."""
    return (
        f"seed {seed}, {days} days from {start:%Y-%m-%d}, {per_weekday:,} requests per "
        "weekday (weekends 35 %), diurnal; tokens lognormal around 6,000 in / 600 out"
    )


def report_parameters(
    source: dict[str, str], trace: Trace, timing: Timing, candidates: list[CandidateIn]
) -> dict[str, str]:
    """The "Settings and parameters" of a report, after the trace's own lines."""
    if "synthetic trace" in source:
        mix = default_selections(candidates)
        total = sum(weight for _, weight in mix)
        source = {
            **source,
            "traffic mix": ", ".join(
                f"{selection.label} {100 * weight / total:.0f} %" for selection, weight in mix
            ),
        }
    return {
        **source,
        "refresh interval / beat / reset grace": (
            f"{timing.refresh_interval_seconds:g} s / {timing.beat_seconds:g} s / "
            f"{timing.reset_grace_seconds:g} s"
        ),
        "earlier design's cache lifetime": f"{timing.original_cache_ttl_seconds:g} s",
        "trace span": f"{trace.hours:.1f} h",
        "plan sizing": PLAN_SIZING,
    }


# --- the dashboard's runs -------------------------------------------------------------------


def latest_run() -> SimulationRun | None:
    """The newest run, whatever its state."""
    return SimulationRun.objects.order_by("-created_at", "-id").first()


def _fail(run: SimulationRun, error: str, now: datetime) -> None:
    run.state = SimulationRun.State.FAILED
    run.active = None
    run.error = error[:500]
    run.finished_at = now
    run.updated_at = now
    run.save(update_fields=["state", "active", "error", "finished_at", "updated_at"])


def start_simulation(
    actor: str,
    *,
    send: Callable[[int], None],
    now: datetime | None = None,
    days: int = DEFAULT_DAYS,
    requests_per_weekday: int = DEFAULT_REQUESTS_PER_WEEKDAY,
) -> SimulationRun:
    """Queue a run and hand its id to `send` (which publishes the task). SimulationBusy
    when another run is active; a run whose task could not be queued comes back failed,
    its error saying so."""
    now = now or timezone.now()
    with transaction.atomic():
        active = SimulationRun.objects.select_for_update().filter(active=True).first()
        if active is not None and now - active.updated_at > STALE_AFTER:
            _fail(
                active,
                "The worker stopped reporting progress (it was restarted or killed), so "
                "this run was given up.",
                now,
            )
        elif active is not None:
            raise SimulationBusy(active)
        try:
            with transaction.atomic():
                run = SimulationRun.objects.create(
                    requested_by=actor,
                    created_at=now,
                    updated_at=now,
                    days=days,
                    requests_per_weekday=requests_per_weekday,
                    progress_total=days * len(ALL_POLICIES),
                    stage="Waiting for a worker",
                )
        except IntegrityError:  # another start won the race for the one active slot
            raise SimulationBusy(SimulationRun.objects.get(active=True)) from None
    try:
        send(run.pk)
    except Exception as error:
        logger.warning("could not queue simulation %s: %s", run.pk, type(error).__name__)
        _fail(
            run,
            "The task queue could not be reached, so the simulation was not started. "
            "Check that the broker and a worker are running, then try again.",
            timezone.now(),
        )
    return run


def _progress(run_id: int, clock: Callable[[], datetime]) -> Callable[[Policy, int, int], None]:
    done = 0

    def step(policy: Policy, day: int, days: int) -> None:
        nonlocal done
        done += 1
        SimulationRun.objects.filter(pk=run_id).update(
            progress_done=done,
            stage=f"Replaying {policy.label}: day {day} of {days}",
            updated_at=clock(),
        )

    return step


def run_simulation(run_id: int, *, clock: Callable[[], datetime] = timezone.now) -> str:
    """Run a queued simulation (the task calls this): progress as it goes, then the
    report or the error. Idempotent: a run that is not queued any more is left alone.
    Returns the run's state."""
    now = clock()
    claimed = SimulationRun.objects.filter(pk=run_id, state=SimulationRun.State.QUEUED).update(
        state=SimulationRun.State.RUNNING, started_at=now, updated_at=now, stage="Loading"
    )
    run = SimulationRun.objects.filter(pk=run_id).first()
    if run is None or not claimed:
        return run.state if run is not None else "missing"
    try:
        trace_start = DEFAULT_START
        model = TrafficModel(days=run.days, requests_per_weekday=run.requests_per_weekday)
        candidates = registered_candidates()
        trace = synthetic_trace(
            trace_start, default_selections(candidates), model, seed=DEFAULT_SEED
        )
        loaded = load_world(anchor_of(trace))
        results = simulate_all(
            loaded.world, trace, timing=loaded.timing, on_progress=_progress(run_id, clock)
        )
        source = {
            "synthetic trace": synthetic_parameters(
                seed=DEFAULT_SEED,
                days=run.days,
                start=trace_start,
                per_weekday=run.requests_per_weekday,
            )
        }
        context = ReportContext(
            trace=trace,
            connections=loaded.connections,
            config=loaded.config,
            parameters=report_parameters(source, trace, loaded.timing, list(candidates)),
        )
        report = json.loads(json.dumps(report_context(results, context)))
    except SimulationError as error:
        _fail(run, str(error), clock())
        return SimulationRun.State.FAILED
    except Exception as error:
        logger.exception("simulation %s failed", run_id)
        _fail(
            run,
            f"The simulation stopped with an unexpected error ({type(error).__name__}); "
            "the worker's log has the details.",
            clock(),
        )
        return SimulationRun.State.FAILED
    finished = clock()
    SimulationRun.objects.filter(pk=run_id).update(
        state=SimulationRun.State.SUCCEEDED,
        active=None,
        report=report,
        progress_done=run.progress_total,
        stage="Finished",
        finished_at=finished,
        updated_at=finished,
    )
    kept = SimulationRun.objects.filter(report__isnull=False).order_by("-finished_at", "-id")
    SimulationRun.objects.filter(
        pk__in=list(kept.values_list("pk", flat=True)[REPORTS_KEPT:])
    ).update(report=None)
    return SimulationRun.State.SUCCEEDED


# --- the report the What-if page shows ------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ShownReport:
    """A report and where it came from."""

    context: dict[str, Any]
    origin: str  # "run", "command" or "shipped"
    at: datetime | None  # when it was made (None: the shipped one)
    run: SimulationRun | None = None


def _read_json(path: Path) -> dict[str, Any] | None:
    try:
        value = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return value if isinstance(value, dict) else None


def shown_report() -> ShownReport | None:
    """The newest report: the last successful dashboard run or `manage.py simulate`'s
    latest, whichever is newer; else the shipped one; None when none can be read."""
    run = (
        SimulationRun.objects.filter(state=SimulationRun.State.SUCCEEDED)
        .order_by("-finished_at", "-id")
        .first()
    )
    latest = Path(settings.VAR_DIR) / "reports" / LATEST_JSON_NAME
    command_at: datetime | None = None
    try:
        command_at = datetime.fromtimestamp(latest.stat().st_mtime, tz=UTC)
    except OSError:
        command_at = None
    if run is not None and run.report and (command_at is None or run.finished_at >= command_at):  # type: ignore[operator]
        return ShownReport(run.report, "run", run.finished_at, run)
    if command_at is not None:
        context = _read_json(latest)
        if context is not None:
            return ShownReport(context, "command", command_at)
    context = _read_json(SHIPPED_REPORT)
    return ShownReport(context, "shipped", None) if context is not None else None
