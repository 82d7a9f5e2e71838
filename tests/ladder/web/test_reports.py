"""The dashboard links the latest what-if report."""

from __future__ import annotations

from pathlib import Path

import pytest
from django.contrib.auth.models import Group, User
from django.test import Client

pytestmark = pytest.mark.django_db


@pytest.fixture
def viewer(client: Client) -> Client:
    user = User.objects.create_user("vera", password="a-long-test-password")
    user.groups.add(Group.objects.get(name="viewer"))
    client.force_login(user)
    return client


def test_without_a_report_the_page_says_how_to_make_one(
    viewer: Client, settings: pytest.FixtureRequest, tmp_path: Path
) -> None:
    settings.VAR_DIR = tmp_path  # type: ignore[attr-defined]

    response = viewer.get("/reports/simulation/")

    assert response.status_code == 200
    assert "python manage.py simulate" in response.content.decode()


def test_the_latest_report_is_served_under_its_own_strict_csp(
    viewer: Client, settings: pytest.FixtureRequest, tmp_path: Path
) -> None:
    settings.VAR_DIR = tmp_path  # type: ignore[attr-defined]
    (tmp_path / "reports").mkdir()
    (tmp_path / "reports" / "latest.html").write_text("<html><svg></svg>report</html>")

    response = viewer.get("/reports/simulation/")

    assert response.content == b"<html><svg></svg>report</html>"
    assert response["Content-Security-Policy"].startswith("default-src 'none';")
    assert "script-src" not in response["Content-Security-Policy"]


def test_every_page_links_the_report(viewer: Client) -> None:
    response = viewer.get("/")

    assert 'href="/reports/simulation/"' in response.content.decode()


def test_without_a_report_an_htmx_request_gets_the_page_fragment_not_a_500(
    viewer: Client, settings: pytest.FixtureRequest, tmp_path: Path
) -> None:
    settings.VAR_DIR = tmp_path  # type: ignore[attr-defined]

    page = viewer.get("/reports/simulation/")
    fragment = viewer.get("/reports/simulation/", headers={"HX-Request": "true"})

    assert page.status_code == 200
    assert "<html" in page.content.decode()
    assert fragment.status_code == 200
    body = fragment.content.decode()
    assert "<html" not in body
    assert body.lstrip().startswith('<section class="card" id="report-missing">')
    assert "python manage.py simulate" in body
    assert fragment["Vary"] == page["Vary"]
    assert "HX-Request" in fragment["Vary"]
