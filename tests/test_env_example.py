"""`.env.example` lists every variable the settings module reads, and nothing else: the
settings are imported in a fresh process with django-environ's readers recording each
name they are asked for."""

from __future__ import annotations

import os
import re

from tests.processes import ROOT, run_python

RECORD_NAMES = """
import environ, json
names = set()
for method in ("str", "int", "float", "bool", "list", "json", "url", "db_url", "path",
               "dict", "tuple", "cache_url", "email_url", "search_url", "bytes", "__call__"):
    original = getattr(environ.Env, method, None)
    if original is None:
        continue
    def recording(self, var, *args, _original=original, **kwargs):
        names.add(var)
        return _original(self, var, *args, **kwargs)
    setattr(environ.Env, method, recording)
import omniroute_admin.settings
print(json.dumps(sorted(names)))
"""
LISTED = re.compile(r"^#?\s?([A-Z][A-Z0-9_]+)=", re.MULTILINE)


def _read_by_settings(database_url: str) -> set[str]:
    import json

    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST", "DJANGO_"))}
    env.update({"DJANGO_SETTINGS_MODULE": "omniroute_admin.settings"})
    env.pop("DATABASE_URL", None)
    if database_url:
        env["DATABASE_URL"] = database_url
    result = run_python(["-c", RECORD_NAMES], env)
    assert result.returncode == 0, result.stderr
    names: set[str] = set(json.loads(result.stdout.strip().splitlines()[-1]))
    return names


def test_env_example_lists_exactly_the_variables_the_settings_read() -> None:
    listed = set(LISTED.findall((ROOT / ".env.example").read_text()))
    # SQLite (the default), then PostgreSQL, whose options only its URL reads (importing
    # the settings connects to nothing).
    read = _read_by_settings("") | _read_by_settings("postgres://nobody@127.0.0.1:9/none")

    assert len(read) > 40  # the recorder saw the settings, not an empty import
    assert sorted(read - listed) == []  # read but not documented
    assert sorted(listed - read) == []  # documented but never read
