import json
import pytest
from django.test import Client
from tests.ladder.factories import make_token, make_connection

@pytest.mark.django_db
def test_explore():
    op = make_token("ops", "operator")
    gw = make_token("gw", "gateway")
    c = Client()
    h = {"HTTP_AUTHORIZATION": f"Bearer {op}"}
    def show(method, path, body=None, raw=None, **extra):
        kw = dict(h); kw.update(extra)
        if raw is not None:
            r = getattr(c, method)(path, raw, content_type="application/json", **kw)
        elif body is not None:
            r = getattr(c, method)(path, json.dumps(body), content_type="application/json", **kw)
        else:
            r = getattr(c, method)(path, **kw)
        print(method, path, r.status_code, r.get("Content-Type"), r.content[:300])
    show("post", "/api/v1/catalog", raw="{not json")
    show("post", "/api/v1/catalog", raw="[1,2]")
    show("post", "/api/v1/catalog", raw="")
    show("get", "/api/v1/catalog/abc")
    show("get", "/api/v1/catalog/99999999999999999999999999")
    show("delete", "/api/v1/prices/99999999999999999999999999")
    show("get", "/api/v1/connections/a%20b")
    show("get", "/api/v1/connections/" + "a"*200)
    show("get", "/api/v1/pools/auto/foo:bar")
    show("get", "/api/v1/pools/auto/coding:thrifty")
    show("get", "/api/v1/pools/nope")
    show("put", "/api/v1/settings/ladder", raw="{bad", HTTP_AUTHORIZATION=f"Bearer {gw}")
    show("get", "/api/v1/catalog", HTTP_AUTHORIZATION="Bearer nope")
    show("get", "/api/v1/catalog", HTTP_AUTHORIZATION="")
    show("get", "/api/v1/nothing")
    make_connection("c1")
    show("post", "/api/v1/connections/c1/readings", {"remaining_percent": 50, "checked_at": "0001-01-01T00:00:00+05:00"})
    show("post", "/api/v1/connections/c1/readings", {"remaining_percent": True})
    show("post", "/api/v1/connections/c1/readings", {"remaining_percent": 50, "checked_at": "2026-01-01T00:00:00-21:00"})
    show("put", "/api/v1/connections/c2", {"provider": "x", "auth_type": "a\u0000b"})
