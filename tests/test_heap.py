"""The server process freezes its startup heap (omniroute_admin.heap): the cyclic
collector's full passes then walk only what was made after it."""

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

PROBE = """
import gc, json
import omniroute_admin.asgi
print(json.dumps({"frozen": gc.get_freeze_count(), "tracked": len(gc.get_objects())}))
"""


def test_loading_the_server_leaves_its_startup_heap_frozen():
    env = dict(os.environ, DJANGO_SETTINGS_MODULE="omniroute_admin.settings")
    result = subprocess.run(
        [sys.executable, "-c", PROBE], cwd=ROOT, env=env, capture_output=True, check=True
    )
    counts = json.loads(result.stdout.decode().strip().splitlines()[-1])
    # Django and the apps are over 100,000 objects; what the collector still walks after
    # the import is what the last lines of the entry point made, a few hundred at most.
    assert counts["frozen"] > 50_000
    assert counts["tracked"] < 2_000


SETTLE = """
import gc, json, weakref
from omniroute_admin.heap import settle

class Cycle:
    pass

garbage = Cycle()
garbage.me = garbage
gone = weakref.ref(garbage)
del garbage
frozen = settle()
print(json.dumps({"collected": gone() is None, "frozen": frozen, "count": gc.get_freeze_count()}))
"""


def test_settle_collects_garbage_before_freezing_and_says_how_many_it_froze():
    # In a process of its own: no other thread frees a frozen object between the two
    # counts (an xdist worker's channel thread once did: 521,456 frozen, 521,455 counted).
    result = subprocess.run(
        [sys.executable, "-c", SETTLE], cwd=ROOT, capture_output=True, check=True
    )
    answer = json.loads(result.stdout.decode().strip().splitlines()[-1])
    # Frozen before a collection, the cycle would live on in the permanent generation.
    assert answer["collected"] is True
    assert answer["frozen"] == answer["count"]
    assert answer["frozen"] > 0
