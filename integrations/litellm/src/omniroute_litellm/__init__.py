"""LiteLLM plugin for OmniRoute (see README.md): `OmniRouteRouter` for a Router of your
own; `omniroute_litellm.proxy.handler` for the LiteLLM proxy's config.yaml."""

from .dispatch import NoCapacity
from .model_list import LITELLM_TO_CATALOG, ModelListError
from .router import OmniRouteRouter

__all__ = ["LITELLM_TO_CATALOG", "ModelListError", "NoCapacity", "OmniRouteRouter"]
