"""The dashboard kit every app's views share (omniroute_admin/dashboard.py)."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from django.test import RequestFactory
from django_htmx.middleware import HtmxDetails

from omniroute_admin.dashboard import render

pytestmark = pytest.mark.django_db


def test_render_answers_a_page_without_partials_whole_to_an_htmx_request() -> None:
    request = RequestFactory().get("/reports/simulation/", headers={"HX-Request": "true"})
    request.user = User.objects.create_superuser("root", password="a-long-test-password")
    request.htmx = HtmxDetails(request)  # type: ignore[attr-defined]

    response = render(
        request,  # type: ignore[arg-type]
        "ladder/no_report.html",
        {},
        partials=(),
    )

    assert response.template_name == "ladder/no_report.html"
