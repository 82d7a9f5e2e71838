"""The real LiteLLM proxy server (`litellm --config config.yaml`, the CLI of the
integrations venv) on a port of 127.0.0.1, with its merged output kept."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import httpx

READY_TIMEOUT = 300.0  # the proxy imports for minutes on a loaded two-core machine
MASTER_KEY = "sk-e2e-master-key"


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class LiteLLMProxy:
    def __init__(self, config: dict[str, Any], env: dict[str, str], tmp: Path) -> None:
        path = tmp / "config.yaml"
        path.write_text(json.dumps(config, indent=2))  # JSON is YAML
        self.base_url = f"http://127.0.0.1:{free_port()}"
        self.log: list[str] = []
        argv = [
            str(Path(sys.executable).parent / "litellm"),
            "--config",
            str(path),
            "--host",
            "127.0.0.1",
            "--port",
            self.base_url.rsplit(":", 1)[1],
        ]
        # The proxy's own database would be DATABASE_URL (the OmniRoute tests' one): none.
        inherited = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "DIRECT_URL")}
        self.process = subprocess.Popen(
            argv,
            cwd=tmp,
            env={**inherited, "LITELLM_LOCAL_MODEL_COST_MAP": "True", **env},
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        threading.Thread(target=self._read, daemon=True).start()
        deadline = time.monotonic() + READY_TIMEOUT
        while not self._alive():
            if self.process.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise AssertionError("the LiteLLM proxy did not start:\n" + self.tail())
            time.sleep(0.2)

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.log.append(line.rstrip())

    def _alive(self) -> bool:
        try:
            return httpx.get(self.base_url + "/health/liveliness", timeout=2).status_code == 200
        except httpx.TransportError:
            return False

    def tail(self, lines: int = 60) -> str:
        return "\n".join(self.log[-lines:])

    def chat(self, model: str, content: str = "hello") -> httpx.Response:
        return httpx.post(
            self.base_url + "/v1/chat/completions",
            json={"model": model, "messages": [{"role": "user", "content": content}]},
            headers={"Authorization": f"Bearer {MASTER_KEY}"},
            timeout=60,
        )

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
