"""The server process's startup heap, kept out of the cyclic garbage collector's way.

Once loaded, Django, the apps and their schemas are about 120,000 objects tracked by the
collector for the life of the process, and every full collection walks them all: 50-250
ms, every request's pause on an event loop (docs/HOT_PATH.md, "Collector pauses").
`settle` moves them into the collector's permanent generation (`gc.freeze`); reference
counting still frees a frozen object nothing refers to."""

from __future__ import annotations

import gc


def settle() -> int:
    """Collect the garbage of startup, freeze what is left; the number frozen."""
    gc.collect()
    gc.freeze()
    return gc.get_freeze_count()
