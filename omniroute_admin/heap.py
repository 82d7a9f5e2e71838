"""The server process's startup heap, kept out of the cyclic garbage collector's way.

Django, the apps, django-ninja's schemas and the price catalog's code leave about 120,000
objects tracked by the collector once loaded, and all of them live as long as the
process. Every full (generation 2) collection walks all of them: 50-60 ms here on a quiet
core, 150-250 ms under the benchmark's load, and on an event loop that pause is every
request's pause (docs/HOT_PATH.md, "Collector pauses"). `settle` collects once, then
moves every object still alive into the collector's permanent generation (`gc.freeze`),
so later collections walk only what was made after it. Reference counting still frees a
frozen object the moment nothing refers to it; only a reference cycle among frozen
objects would outlive its use, and startup objects are not let go."""

from __future__ import annotations

import gc


def settle() -> int:
    """Collect the garbage of startup, freeze what is left; the number frozen."""
    gc.collect()
    gc.freeze()
    return gc.get_freeze_count()
