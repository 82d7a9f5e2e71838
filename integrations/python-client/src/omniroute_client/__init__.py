"""Gateway-side client of the OmniRoute control plane (see README.md)."""

from .client import AsyncOmniRouteClient, OmniRouteClient
from .decisions import (
    ControlPlaneUnavailable,
    Decision,
    NotFound,
    OmniRouteError,
    TokenRejected,
)
from .events import event_for_exception, event_for_response, understood_headers
from .sticky import StickyConnections, conversation_key

__all__ = [
    "AsyncOmniRouteClient",
    "ControlPlaneUnavailable",
    "Decision",
    "NotFound",
    "OmniRouteClient",
    "OmniRouteError",
    "StickyConnections",
    "TokenRejected",
    "conversation_key",
    "event_for_exception",
    "event_for_response",
    "understood_headers",
]
