import pytest
from django.utils import timezone
from tests.e2e.conftest import sign_in
from tests.e2e.worlds import make_user, seed_demo_world
from tests.e2e.pages import parse
pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True, serialized_rollback=True)]

def test_debug(page, live_server):
    seed_demo_world(timezone.now(), history=False)
    make_user("olga", "operator")
    sign_in(page, live_server.url, "olga")
    page.goto(f"{live_server.url}/pools/?auto_id=auto/thrifty")
    doc = parse(page.content())
    print("EXCL", [r.text for r in doc.by_class("excluded")[0].by_tag("tr")] if doc.by_class("excluded") else None)
    print("RUNGS", [r.text for r in doc.by_class("pool-rung")])
