"""Gateway-side client of the OmniRoute control plane (see README.md)."""

from .client import AsyncOmniRouteClient, OmniRouteClient
from .decisions import ControlPlaneUnavailable, Decision, NotFound, OmniRouteError
from .events import event_for_exception, event_for_response, understood_headers

__all__ = [
    "AsyncOmniRouteClient",
    "ControlPlaneUnavailable",
    "Decision",
    "NotFound",
    "OmniRouteClient",
    "OmniRouteError",
    "event_for_exception",
    "event_for_response",
    "understood_headers",
]
