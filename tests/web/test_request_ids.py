"""Every request has an id (X-Request-ID: a sane one from the client or proxy is kept, anything
else replaced), returned in the response and carried with the signed-in user's id by every line
the request logs, under WSGI and under ASGI (where Django runs sync views on other threads), for
a page's session and for the API's bearer key alike; a turn the request queues keeps it."""

from __future__ import annotations

import logging
import re

import pytest
from asgiref.sync import async_to_sync
from django.http import HttpRequest, HttpResponse
from django.test import AsyncClient
from django.urls import path
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from rollback_site.urls import urlpatterns as site_urlpatterns
from sessions_app.models import Turn
from tests.web.api.conftest import bearer_client

pytestmark = [pytest.mark.django_db, pytest.mark.urls(__name__)]

log = logging.getLogger("tests.web.request_ids")
NEW_ID = re.compile(r"[0-9a-f]{32}")


def page(request: HttpRequest) -> HttpResponse:
    log.info("a page")
    return HttpResponse("ok")


class ApiPage(APIView):
    def get(self, request: Request) -> Response:
        log.info("an API view")
        return Response({"ok": True})


urlpatterns = [
    path("tests/page/", page),
    path("tests/api/", ApiPage.as_view()),
    *site_urlpatterns,
]


def said(records, message: str) -> logging.LogRecord:
    return next(r for r in records if r.getMessage() == message)


@pytest.mark.parametrize(
    "incoming",
    ["b2c1e1e0-8a2f-4c1e-9f6e-0a4c2b1d3e5f", "0af7651916cd43dd8448eb211c80319c", "lb-1.2:abc_9"],
)
def test_a_sane_incoming_request_id_is_kept(client, incoming, log_records):
    response = client.get("/tests/page/", HTTP_X_REQUEST_ID=incoming)
    assert response["X-Request-ID"] == incoming
    assert said(log_records, "a page").request_id == incoming


@pytest.mark.parametrize(
    "incoming",
    [
        "x" * 129,  # too long
        "two words",
        'quote"d',
        "semi;colon",
        "new\\nline",
        "<script>",
        "é-accent",
        "",
    ],
)
def test_an_odd_or_missing_request_id_is_replaced_by_a_new_one(client, incoming, log_records):
    response = client.get("/tests/page/", HTTP_X_REQUEST_ID=incoming)
    request_id = response["X-Request-ID"]
    assert NEW_ID.fullmatch(request_id)
    assert request_id != incoming
    assert said(log_records, "a page").request_id == request_id


def test_each_request_gets_its_own_id_and_nothing_stays_bound_after_it(client, log_records):
    first = client.get("/tests/page/")["X-Request-ID"]
    second = client.get("/tests/page/")["X-Request-ID"]
    assert NEW_ID.fullmatch(first)
    assert NEW_ID.fullmatch(second)
    assert first != second
    log.info("after the requests")
    assert getattr(said(log_records, "after the requests"), "request_id", None) is None


def test_every_answer_has_an_id_even_an_error(client, log_records):
    response = client.get("/no/such/page/")
    assert response.status_code == 404
    assert NEW_ID.fullmatch(response["X-Request-ID"])
    # Django logs the 404 after the middleware ended; the id comes from the request.
    assert said(log_records, "Not Found: /no/such/page/").request_id == response["X-Request-ID"]


def test_a_pages_lines_carry_the_signed_in_user(client, alice, log_records):
    client.force_login(alice)
    response = client.get("/tests/page/")
    record = said(log_records, "a page")
    assert (record.request_id, record.user_id) == (response["X-Request-ID"], alice.pk)


def test_an_api_requests_lines_carry_the_user_of_its_bearer_key(alice, log_records):
    response = bearer_client(alice).get("/tests/api/")
    assert response.status_code == 200
    record = said(log_records, "an API view")
    assert (record.request_id, record.user_id) == (response["X-Request-ID"], alice.pk)


def test_under_asgi_the_ids_reach_the_views_thread(alice, log_records):
    """Django runs a sync view under ASGI through asgiref's sync_to_async; the ids bound by the
    middleware, and the user DRF reads from the bearer key inside the view, hold there."""
    key = bearer_client(alice).secret
    client = AsyncClient()
    client.force_login(alice)
    page_response = async_to_sync(client.get)("/tests/page/", headers={"X-Request-ID": "asgi-1"})
    api_response = async_to_sync(AsyncClient().get)(
        "/tests/api/", headers={"Authorization": f"Bearer {key}"}
    )
    assert page_response["X-Request-ID"] == "asgi-1"
    assert (said(log_records, "a page").request_id, said(log_records, "a page").user_id) == (
        "asgi-1",
        alice.pk,
    )
    record = said(log_records, "an API view")
    assert (record.request_id, record.user_id) == (api_response["X-Request-ID"], alice.pk)


def test_a_turn_keeps_the_id_of_the_request_that_queued_it(alice, session):
    # The test's transaction never commits, so no worker takes the turn here.
    response = bearer_client(alice).post(
        f"/api/v1/sessions/{session.pk}/turns/",
        {"message": "hi"},
        format="json",
        HTTP_X_REQUEST_ID="queued-by-me",
    )
    assert response.status_code == 202
    assert response["X-Request-ID"] == "queued-by-me"
    assert Turn.objects.get(pk=response.json()["id"]).metadata["request_id"] == "queued-by-me"
