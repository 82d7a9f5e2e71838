"""A fresh Python process started from the project root: for what only start-up shows
(settings read from the environment, the checks `manage.py` runs)."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# Django set up with the project's settings, as every entry point does.
DJANGO_SETUP = (
    "import django, os; "
    "os.environ.setdefault('DJANGO_SETTINGS_MODULE', 'omniroute_admin.settings'); "
    "django.setup()"
)


def run_python(
    args: Sequence[str], env: Mapping[str, str], timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    """`python <args>` in the project root with exactly `env`, its output captured."""
    return subprocess.run(
        [sys.executable, *args],
        cwd=ROOT,
        env=dict(env),
        capture_output=True,
        text=True,
        timeout=timeout,
    )
