"""Gzip for the dashboard's HTML only (omniroute_admin/middleware.py): a page or a live
fragment travels compressed, and its ETag still answers 304; the API and a streamed CSV
export are never compressed."""

from __future__ import annotations

import gzip

import pytest
from django.test import Client

from omniroute_admin import dashboard
from tests.ladder.factories import NOW, make_token
from tests.worlds import htmx_headers, seed_demo_world, signed_in

pytestmark = pytest.mark.django_db

GZIP = {"Accept-Encoding": "gzip, deflate, br"}


@pytest.fixture
def operator(client: Client, monkeypatch: pytest.MonkeyPatch) -> Client:
    monkeypatch.setattr(dashboard, "current_time", lambda: NOW)
    seed_demo_world(NOW, history=False)
    return signed_in(client, "olga", "operator")


def test_a_live_fragment_travels_gzipped_and_reads_the_same(operator: Client) -> None:
    plain = operator.get("/candidates/?page=1", headers=htmx_headers("candidates-table"))

    packed = operator.get(
        "/candidates/?page=1", headers={**htmx_headers("candidates-table"), **GZIP}
    )

    assert packed["Content-Encoding"] == "gzip"
    assert gzip.decompress(packed.content) == plain.content
    assert len(packed.content) < len(plain.content) // 4
    assert packed["Vary"] == "HX-Request, Cookie, Accept-Encoding"


def test_a_gzipped_fragments_etag_is_weak_and_still_answers_304(operator: Client) -> None:
    headers = {**htmx_headers("candidates-table"), **GZIP}
    first = operator.get("/candidates/?page=1", headers=headers)

    second = operator.get(
        "/candidates/?page=1", headers={**headers, "If-None-Match": first["ETag"]}
    )

    assert first["ETag"].startswith('W/"')
    assert (second.status_code, second.content, second["ETag"]) == (304, b"", first["ETag"])
    assert second["Vary"] == first["Vary"]
    assert "Content-Encoding" not in second


def test_the_api_is_never_gzipped(operator: Client) -> None:
    token = make_token()

    answer = operator.get(
        "/api/v1/pools/auto/thrifty", headers={"Authorization": f"Bearer {token}", **GZIP}
    )

    assert answer.status_code == 200
    assert len(answer.content) > 200
    assert "Content-Encoding" not in answer
    assert "Accept-Encoding" not in answer.get("Vary", "")


def test_a_streamed_csv_export_is_never_gzipped(operator: Client) -> None:
    answer = operator.get("/spend/export.csv?window=current", headers=GZIP)

    assert answer.status_code == 200
    assert answer.streaming
    assert "Content-Encoding" not in answer


def test_a_static_files_304_keeps_the_etag_of_its_200(client: Client) -> None:
    first = client.get("/static/dashboard.js", headers=GZIP)

    second = client.get("/static/dashboard.js", headers={**GZIP, "If-None-Match": first["ETag"]})

    assert (first.status_code, second.status_code) == (200, 304)
    assert second["ETag"] == first["ETag"]
