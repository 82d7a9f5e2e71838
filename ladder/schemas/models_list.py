"""The OpenAI-style model list (ladder/api/models_list.py)."""

from __future__ import annotations

from typing import Literal

from ninja import Schema


class ModelOut(Schema):
    id: str
    object: Literal["model"]
    created: int
    owned_by: str


class ModelListOut(Schema):
    object: Literal["list"]
    data: list[ModelOut]
