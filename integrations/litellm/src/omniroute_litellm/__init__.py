"""LiteLLM Router plugin for OmniRoute (see README.md)."""

from .model_list import LITELLM_TO_CATALOG, ModelListError
from .router import NoCapacity, OmniRouteRouter

__all__ = ["LITELLM_TO_CATALOG", "ModelListError", "NoCapacity", "OmniRouteRouter"]
