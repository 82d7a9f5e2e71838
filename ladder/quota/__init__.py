"""Quota adapters: poll a provider's usage endpoint and reduce it to one reading.

Pure parsers beside thin IO fetchers, one small module per provider, and a registry
keyed by name. No Django here: the shell stores readings and wires URLs and schedules.
"""

from ladder.core.types import QuotaStatus, WindowReading

from .base import Adapter, ErrorKind, ParsedQuota, QuotaError, env_var_for, unknown
from .headers import HeaderInfo, parse_rate_limit_headers
from .http import make_client, request_json
from .registry import REGISTRY, UnknownAdapter, get_adapter

__all__ = [
    "REGISTRY",
    "Adapter",
    "ErrorKind",
    "HeaderInfo",
    "ParsedQuota",
    "QuotaError",
    "QuotaStatus",
    "UnknownAdapter",
    "WindowReading",
    "env_var_for",
    "get_adapter",
    "make_client",
    "parse_rate_limit_headers",
    "request_json",
    "unknown",
]
