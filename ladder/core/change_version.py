"""The control plane's change version: the two change counters as one string.

`"<config>.<state>"`: it moves whenever either counter does (spec/api.md, "Caching a
decision in the gateway"). Counters only grow, so a version is newer than another when
either of its counters is greater."""

from __future__ import annotations

import re

Counters = tuple[int, int]

# Digits only, each at most 18 (a counter fits a signed 64-bit integer).
VERSION_REGEX = r"^[0-9]{1,18}\.[0-9]{1,18}$"
_VERSION = re.compile(VERSION_REGEX)


def format_version(counters: Counters) -> str:
    """The version string of (config, state) counters."""
    config, state = counters
    return f"{config}.{state}"


def parse_version(text: str) -> Counters | None:
    """The counters of a version string, or None when it is not one."""
    if not _VERSION.fullmatch(text):
        return None
    config, state = text.split(".")
    return int(config), int(state)


def has_moved(current: Counters, since: Counters) -> bool:
    """Whether `current` is a later version than `since` (a counter grew). A reading older
    than `since` (a listener not caught up yet) has not moved."""
    return current[0] > since[0] or current[1] > since[1]
