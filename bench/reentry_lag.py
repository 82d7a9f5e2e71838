"""Re-entry lag: from a plan's reset instant to a current reading above the re-entry
floor, with a real Celery worker and beat and a local fake usage endpoint.

    .venv/bin/python bench/reentry_lag.py [--trials 10] [--lead 3]

Uses DATABASE_URL and CELERY_BROKER_URL as set (defaults: a SQLite file and the
filesystem broker in var/bench/). Each trial: the fake endpoint says EXHAUSTED until a
reset `--lead` seconds ahead and 95 % left after it; nothing else is done by hand. The
product's own settings are used (QUOTA_RESET_GRACE_SECONDS, QUOTA_BEAT_SECONDS).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
BENCH_DIR = ROOT / "var" / "bench"
BENCH_DIR.mkdir(parents=True, exist_ok=True)
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "omniroute_admin.settings")
os.environ.setdefault("DATABASE_URL", f"sqlite:///{BENCH_DIR / 'bench.sqlite3'}")
os.environ.setdefault("CELERY_FILESYSTEM_BROKER_DIR", str(BENCH_DIR / "broker"))
if not os.environ.get("OMNIROUTE_CREDENTIAL_KEY"):
    from cryptography.fernet import Fernet

    os.environ["OMNIROUTE_CREDENTIAL_KEY"] = "bench:" + Fernet.generate_key().decode()

import django  # noqa: E402

django.setup()

from django.conf import settings  # noqa: E402
from django.core.management import call_command  # noqa: E402

from ladder import services  # noqa: E402
from ladder.models import Connection  # noqa: E402
from tests.integration.harness import ScriptedUpstream, Worker, database_url, wait_until  # noqa: E402


def payload(utilization: float, resets_at: datetime) -> dict[str, Any]:
    return {"five_hour": {"utilization": utilization, "resets_at": resets_at.isoformat()}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=10)
    parser.add_argument("--lead", type=float, default=3.0, help="seconds from poll to reset")
    args = parser.parse_args()
    call_command("migrate", verbosity=0, skip_checks=True)
    floor = services.load_config().reentry_floor
    upstream = ScriptedUpstream()
    env = dict(os.environ)
    env.update(
        {
            "DATABASE_URL": database_url(),
            "QUOTA_URL_CLAUDE": upstream.url("/api/oauth/usage"),
        }
    )
    connection_id = f"bench-{uuid.uuid4().hex[:8]}"
    services.upsert_connection(
        connection_id,
        services.ConnectionInput("claude", "oauth", quota_source="claude", credential="sk-bench"),
    )
    lags: list[float] = []
    with tempfile.TemporaryDirectory() as tmp:
        worker = Worker(env, Path(tmp))
        try:
            for trial in range(args.trials):
                reset_at = datetime.now(UTC) + timedelta(seconds=args.lead)

                def script(path: str, reset_at: datetime = reset_at) -> tuple[int, Any]:
                    if datetime.now(UTC) < reset_at:
                        return 200, payload(100.0, reset_at)
                    return 200, payload(5.0, reset_at + timedelta(hours=5))

                upstream.script = script
                services.request_refresh(connection_id)

                def current(status: str, reset_at: datetime = reset_at) -> Any:
                    reading = (
                        Connection.objects.select_related("current_reading")
                        .get(connection_id=connection_id)
                        .current_reading
                    )
                    if reading is None or reading.status != status:
                        return None
                    if status == "SAFE" and (reading.remaining_percent or 0) <= floor:
                        return None
                    # Only readings of this trial count.
                    if reading.checked_at < reset_at - timedelta(seconds=args.lead + 5):
                        return None
                    return reading

                wait_until(lambda: current("EXHAUSTED"), timeout=30)
                fresh = wait_until(lambda: current("SAFE"), timeout=60)
                lag = (fresh.checked_at - reset_at).total_seconds()
                lags.append(lag)
                print(f"trial {trial + 1}: re-entry lag {lag:.3f} s", flush=True)
        finally:
            worker.stop()
            upstream.stop()
    print(
        f"\nre-entry lag over {len(lags)} trials (grace {settings.QUOTA_RESET_GRACE_SECONDS} s, "
        f"beat {settings.QUOTA_BEAT_SECONDS} s, broker {settings.CELERY_BROKER_URL.split(':')[0]}, "
        f"database {settings.DATABASES['default']['ENGINE'].rsplit('.', 1)[-1]}): "
        f"median {statistics.median(lags):.3f} s, max {max(lags):.3f} s"
    )


if __name__ == "__main__":
    main()
