"""The interactive API docs in real Chromium: Swagger UI renders every operation of the
served document, and "Try it out" on a pool answers the pool's JSON."""

from __future__ import annotations

import json
import re

import pytest
from django.test import Client
from django.utils import timezone
from playwright.sync_api import Page, expect
from pytest_django.live_server_helper import LiveServer

from tests.ladder.factories import make_token
from tests.worlds import seed_demo_world

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

METHODS = {"get", "put", "post", "delete", "patch"}


def _operation_count() -> int:
    document = json.loads(Client().get("/api/v1/openapi.json").content)
    return sum(
        1 for operations in document["paths"].values() for method in operations if method in METHODS
    )


def test_the_docs_page_shows_every_operation_and_tries_a_pool(
    page: Page, live_server: LiveServer, console_errors: list[str]
) -> None:
    seed_demo_world(timezone.now(), history=False)
    token = make_token("docs-reader")
    expected = _operation_count()

    page.goto(f"{live_server.url}/api/v1/docs")

    expect(page.locator(".opblock")).to_have_count(expected)
    assert expected > 30  # 35 on 2026-12-03: a rendered page, not an empty one
    page.get_by_role("button", name=re.compile("Authorize")).first.click()
    dialog = page.locator(".dialog-ux")
    # One form per bearer scheme (gateway, operator): the token goes in the first.
    dialog.locator("input").first.fill(token)
    dialog.locator("button.authorize").first.click()
    dialog.locator("button.btn-done").first.click()

    pool = page.locator("#operations-ladder-ladder_api_get_pool")  # tag, operation id
    pool.locator(".opblock-summary").first.click()
    pool.get_by_role("button", name="Try it out").click()
    pool.locator("input[placeholder='auto_id']").fill("auto/thrifty")
    pool.get_by_role("button", name="Execute").click()

    status = pool.locator(".live-responses-table tbody .response-col_status").first
    expect(status).to_have_text("200")
    body = pool.locator(".live-responses-table .microlight").first
    expect(body).to_contain_text('"auto_id": "auto/thrifty"')
    assert [e for e in console_errors if "Content Security Policy" in e] == []
