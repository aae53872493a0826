"""Schemathesis (property-based) against the app's own OpenAPI schema: generated requests to
every operation, valid and not, as alice with a real API key and some data of hers. No answer
may be a 500, and every answer must match the schema (status code, content type, body)."""

from __future__ import annotations

import pytest
import schemathesis
from django.core.wsgi import get_wsgi_application
from hypothesis import HealthCheck, settings
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from accounts.services import apikey_create
from checkpoints.services import checkpoint_create
from sessions_app.selectors import current_branch
from sessions_app.services import session_create
from tests.conftest import say

schema = schemathesis.openapi.from_wsgi("/api/v1/schema/?format=json", get_wsgi_application())


@pytest.fixture
def keep_test_connection():
    """The WSGI app closes "old" database connections around each request; on PostgreSQL that
    would close the connection holding the test's transaction. Django's test client turns this
    off during a request; so do we, for Schemathesis' direct calls."""
    from django.core import signals
    from django.db import close_old_connections

    signals.request_started.disconnect(close_old_connections)
    signals.request_finished.disconnect(close_old_connections)
    yield
    signals.request_started.connect(close_old_connections)
    signals.request_finished.connect(close_old_connections)


@pytest.fixture
def auth(django_user_model, keep_test_connection):
    user, _ = django_user_model.objects.get_or_create(username="fuzz")
    session = session_create(owner=user, name="fuzzed")
    branch = current_branch(session)
    say(branch, "hello", "hi")
    checkpoint_create(branch=branch, name="cp")
    _, secret = apikey_create(user=user, name=f"fuzz {user.api_keys.count()}")
    return {"Authorization": f"Bearer {secret}"}


@pytest.mark.django_db
@schema.parametrize()
@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=list(HealthCheck),
    derandomize=True,
)
def test_the_api_matches_its_schema(case, auth):
    case.call_and_validate(
        headers=auth,
        checks=[
            not_a_server_error,
            status_code_conformance,
            content_type_conformance,
            response_schema_conformance,
        ],
    )
