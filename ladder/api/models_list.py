"""The OpenAI-style models list (spec/api.md "Models"): the advertised auto ids."""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest
from ninja import Router

from ladder.core import ADVERTISED_AUTO_IDS
from ladder.schemas import ModelListOut
from omniroute_admin.auth import gateway_auth
from omniroute_admin.errors import GATEWAY_ERRORS

router = Router(tags=["ladder"])


def models_list() -> dict[str, Any]:
    """The OpenAI-style list of the advertised (flat) auto ids."""
    return {
        "object": "list",
        "data": [
            {"id": auto_id.auto_id, "object": "model", "created": 0, "owned_by": "omniroute"}
            for auto_id in ADVERTISED_AUTO_IDS
        ],
    }


@router.get("/models", response={200: ModelListOut, **GATEWAY_ERRORS}, auth=gateway_auth)
def list_models(request: HttpRequest) -> dict[str, Any]:
    """`auto/subscription` and `auto/thrifty`, OpenAI-style. Category composites are
    accepted by the pools endpoint but not listed. Also served at /v1/models."""
    return models_list()
