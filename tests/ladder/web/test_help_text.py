"""Help text as people read it: a literal to type (`none`, `*`) is set as code, never a
backtick on the page (#35 point 8)."""

from __future__ import annotations

import pytest
from django.test import Client

from tests.pages import Element, parse
from tests.worlds import signed_in

pytestmark = pytest.mark.django_db

FORM_PAGES = (
    "/connections/",
    "/candidates/",
    "/catalog/",
    "/prices/",
    "/aliases/",
    "/settings/",
    "/notifications/",
)


@pytest.mark.parametrize("path", FORM_PAGES)
def test_no_help_text_shows_a_backtick(client: Client, path: str) -> None:
    page = parse(signed_in(client, "olga", "operator").get(path).content)

    helps = page.by_class("help") + page.by_class("muted")
    assert helps
    assert [help.text for help in helps if "`" in help.text] == []


def test_a_literal_in_help_text_is_set_as_code(client: Client) -> None:
    operator = signed_in(client, "olga", "operator")
    connection = parse(operator.get("/connections/").content)
    prices = parse(operator.get("/prices/").content)

    def codes(page_helps: list[Element]) -> list[str]:
        return [code.text for help in page_helps for code in help.by_tag("code")]

    assert codes(connection.by_class("help")) == ["none", "none"]
    assert codes(prices.by_class("help")) == ["*"]
