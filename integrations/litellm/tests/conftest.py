from __future__ import annotations

import os
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

# No network for LiteLLM's price map: its bundled copy.
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
# The clients' report spools (one SQLite file per control plane and token): this run's own.
os.environ.setdefault("OMNIROUTE_SPOOL_DIR", tempfile.mkdtemp(prefix="omniroute-spool-"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from server import OmniRouteServer


@pytest.fixture(scope="module")
def omniroute(tmp_path_factory: pytest.TempPathFactory) -> Iterator[OmniRouteServer]:
    server = OmniRouteServer(tmp_path_factory.mktemp("omniroute"))
    yield server
    server.stop()
