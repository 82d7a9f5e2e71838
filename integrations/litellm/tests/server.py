"""The real OmniRoute server for the integration tests: `manage.py migrate`, API tokens
and gunicorn (one worker), run by the PROJECT's Python (its own venv: the server's pins
are never touched by litellm's), on a SQLite file and a port the kernel picks."""

from __future__ import annotations

import os
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parents[3]
READY_TIMEOUT = 60.0


def server_python() -> str:
    configured = os.environ.get("OMNIROUTE_SERVER_PYTHON")
    if configured:
        return configured
    return str(ROOT / ".venv" / "bin" / "python")


class OmniRouteServer:
    def __init__(self, tmp: Path, extra_env: dict[str, str] | None = None) -> None:
        self.python = server_python()
        key = subprocess.run(
            [
                self.python,
                "-c",
                "from cryptography.fernet import Fernet; print(Fernet.generate_key().decode())",
            ],
            check=True,
            capture_output=True,
            text=True,
        ).stdout.strip()
        self.env = {
            k: v for k, v in os.environ.items() if not k.startswith(("PYTEST", "VIRTUAL_ENV"))
        }
        self.env.update(
            {
                "PYTHONPATH": str(ROOT),
                "DATABASE_URL": f"sqlite:///{tmp / 'omniroute.sqlite3'}",
                "DJANGO_DEBUG": "true",
                "OMNIROUTE_CREDENTIAL_KEY": "k1:" + key,
                "CELERY_FILESYSTEM_BROKER_DIR": str(tmp / "broker"),
                "CELERY_BROKER_URL": "filesystem://",
                "BEAT_HEARTBEAT_MAX_AGE_SECONDS": "3600",
                **(extra_env or {}),
            }
        )
        self.env.pop("CELERY_BROKER_URL_OVERRIDE", None)
        (tmp / "broker").mkdir(exist_ok=True)
        self._manage("migrate", "--noinput")
        self.gateway_token = self._manage(
            "create_api_token", "gateway", "--scope", "gateway"
        ).strip()
        self.operator_token = self._manage(
            "create_api_token", "operator", "--scope", "operator"
        ).strip()
        self.log: list[str] = []
        self.base_url = ""
        self._listening = threading.Event()
        self.process = subprocess.Popen(
            [
                self.python,
                "-m",
                "gunicorn",
                "omniroute_admin.wsgi:application",
                "--bind",
                "127.0.0.1:0",
                "--workers",
                "1",
                "--threads",
                "8",
                "--graceful-timeout",
                "5",
            ],
            cwd=ROOT,
            env=self.env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        threading.Thread(target=self._read, daemon=True).start()
        if not self._listening.wait(READY_TIMEOUT):
            self.stop()
            raise AssertionError("gunicorn did not start:\n" + "\n".join(self.log[-40:]))
        deadline = time.monotonic() + READY_TIMEOUT
        while True:
            try:
                if httpx.get(self.base_url + "/healthz", timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline:
                raise AssertionError("gunicorn is not healthy:\n" + "\n".join(self.log[-40:]))
            time.sleep(0.1)

    def _manage(self, *args: str) -> str:
        done = subprocess.run(
            [self.python, "manage.py", *args],
            cwd=ROOT,
            env=self.env,
            capture_output=True,
            text=True,
        )
        if done.returncode != 0:
            raise AssertionError(
                f"manage.py {' '.join(args)} failed:\n{done.stdout}\n{done.stderr}"
            )
        return done.stdout

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.log.append(line.rstrip())
            if not self._listening.is_set() and "Listening at: " in line:
                self.base_url = line.split("Listening at: ", 1)[1].split()[0]
                self._listening.set()

    def api(
        self, method: str, path: str, body: Any = None, *, operator: bool = True
    ) -> httpx.Response:
        token = self.operator_token if operator else self.gateway_token
        return httpx.request(
            method,
            f"{self.base_url}/api/v1{path}",
            json=body,
            headers={"Authorization": f"Bearer {token}"},
            timeout=10,
        )

    def ledger(self) -> list[dict[str, Any]]:
        """The spend ledger's rows, read from the server's database (this server has no
        `GET /api/v1/spend` listing yet)."""
        import json

        code = (
            "import json; from ladder.models import SpendEntry; print(json.dumps([{"
            "'connection_id': e.connection_id, 'cost_usd': str(e.cost_usd), 'rung': e.rung,"
            "'input_tokens': e.input_tokens, 'output_tokens': e.output_tokens}"
            " for e in SpendEntry.objects.order_by('id')]))"
        )
        return list(json.loads(self._manage("shell", "-c", code).strip().splitlines()[-1]))

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
