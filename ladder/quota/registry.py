"""The adapter registry: provider quota sources keyed by name.

Kept apart from ``base`` on purpose: every adapter module imports ``base``, so the table
that imports every adapter cannot live there without an import cycle.
"""

from __future__ import annotations

from types import MappingProxyType

from . import antigravity, claude, codex, copilot, gemini_cli, simulated
from .base import Adapter

# Read-only so no caller can swap an adapter at run time; adding one is a new module here.
REGISTRY: MappingProxyType[str, Adapter] = MappingProxyType(
    {
        adapter.name: adapter
        for adapter in (
            claude.ADAPTER,
            codex.ADAPTER,
            copilot.ADAPTER,
            gemini_cli.ADAPTER,
            antigravity.ADAPTER,
            simulated.ADAPTER,
        )
    }
)


class UnknownAdapter(KeyError):
    """No adapter is registered under the requested name."""

    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.name = name

    def __str__(self) -> str:
        known = ", ".join(sorted(REGISTRY))
        return f"no quota adapter named {self.name!r}; known adapters: {known}"


def get_adapter(name: str) -> Adapter:
    """Return the adapter registered under name, or raise UnknownAdapter."""
    try:
        return REGISTRY[name]
    except KeyError:
        raise UnknownAdapter(name) from None
