import pytest
import schemathesis
from django.core.signals import request_finished, request_started
from django.db import close_old_connections
from hypothesis import HealthCheck, settings
from schemathesis.checks import not_a_server_error, response_schema_conformance

from omniroute_admin.wsgi import application
from tests.ladder.factories import make_candidate, make_connection, make_reading, make_token

schema = schemathesis.openapi.from_wsgi("/api/v1/openapi.json", application)


@pytest.fixture
def operator_token(db):
    request_started.disconnect(close_old_connections)
    request_finished.disconnect(close_old_connections)
    make_connection("claude-max-1")
    make_candidate(categories=("coding",))
    yield make_token("fuzz", "operator")
    request_started.connect(close_old_connections)
    request_finished.connect(close_old_connections)


@schema.parametrize()
@settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))
def test_api(case, operator_token):
    case.call_and_validate(
        headers={"Authorization": f"Bearer {operator_token}"},
        checks=[not_a_server_error, response_schema_conformance],
    )
