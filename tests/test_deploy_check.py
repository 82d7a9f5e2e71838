"""Production settings pass `manage.py check --deploy` (one documented exception)."""

from __future__ import annotations

import os

from tests.processes import DJANGO_SETUP, run_python


def test_check_deploy_is_clean_with_production_settings() -> None:
    # The browser tests set DJANGO_ALLOW_ASYNC_UNSAFE for their own process; a deployment
    # never has it (and the deploy check rightly warns about it).
    env = {
        **{k: v for k, v in os.environ.items() if k != "DJANGO_ALLOW_ASYNC_UNSAFE"},
        "DJANGO_DEBUG": "false",
        "DJANGO_SECRET_KEY": "a-long-random-production-secret-key-0123456789-abcdefghijklmnop",
        "DJANGO_ALLOWED_HOSTS": "omniroute.example.com",
    }

    result = run_python(["manage.py", "check", "--deploy", "--fail-level", "WARNING"], env)

    assert result.returncode == 0, result.stdout + result.stderr
    assert "System check identified no issues" in result.stdout


def test_the_development_secret_key_is_refused_when_debug_is_off() -> None:
    env = {k: v for k, v in os.environ.items() if k != "DJANGO_SECRET_KEY"}
    env["DJANGO_DEBUG"] = "false"

    result = run_python(["-c", DJANGO_SETUP], env)

    assert result.returncode != 0
    assert "DJANGO_SECRET_KEY must be set when DJANGO_DEBUG is off" in result.stderr


def test_a_malformed_setting_stops_start_up_with_its_name() -> None:
    env = {**os.environ, "QUOTA_BEAT_SECONDS": "often"}

    result = run_python(["-c", DJANGO_SETUP], env)

    assert result.returncode != 0
    assert "QUOTA_BEAT_SECONDS has an invalid value" in result.stderr
