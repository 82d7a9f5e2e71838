"""WriteSchema: a body is validated once, with the same refusals as ninja's Schema."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError, field_validator

from billing.schemas import WriteSchema
from ladder.schemas import SpendIn

CALLS: list[str] = []


class Counted(WriteSchema):
    name: str

    @field_validator("name")
    @classmethod
    def count(cls, value: str) -> str:
        CALLS.append(value)
        return value


class Resolved(WriteSchema):
    name: str

    @staticmethod
    def resolve_name(obj: Any) -> str:
        return "resolved"


def test_a_dict_body_is_validated_once() -> None:
    CALLS.clear()
    assert Counted.model_validate({"name": "a"}).name == "a"
    assert CALLS == ["a"]


def test_an_unknown_field_is_still_refused() -> None:
    with pytest.raises(ValidationError) as raised:
        Counted.model_validate({"name": "a", "extra": 1})
    assert [(e["loc"], e["type"]) for e in raised.value.errors()] == [
        (("extra",), "extra_forbidden")
    ]


def test_a_class_with_resolvers_keeps_the_django_getter() -> None:
    assert Resolved.model_validate({"name": "sent"}).name == "resolved"


def test_an_object_goes_through_the_django_getter() -> None:
    class Row:
        name = "from an object"

    CALLS.clear()
    assert Counted.model_validate(Row()).name == "from an object"
    assert CALLS == ["from an object", "from an object"]  # ninja's two passes


def test_a_spend_body_is_the_same_model_as_before() -> None:
    body = {
        "request_id": "r1",
        "connection_id": "openai-key",
        "provider": " openai ",
        "model": "gpt-4o-mini",
        "cost_usd": None,
        "input_tokens": 12,
    }
    assert SpendIn.model_validate(body).model_dump() == {
        "request_id": "r1",
        "connection_id": "openai-key",
        "provider": "openai",
        "model": "gpt-4o-mini",
        "cost_usd": None,
        "input_tokens": 12,
        "output_tokens": None,
        "occurred_at": None,
    }
