"""The API's JSON through orjson (core.renderers) is the document DRF's renderer wrote, byte for
byte, and what orjson refuses is still written."""

from __future__ import annotations

import datetime as dt
import decimal
import uuid

import pytest
from django.utils.translation import gettext_lazy
from rest_framework.renderers import JSONRenderer as DrfRenderer

from core.renderers import JSONRenderer

UTC = dt.UTC
DOCUMENTS = [
    {"count": 2, "next": None, "previous": None, "results": [{"id": 1}, {"id": 2}]},
    {"content": 'héllo ✓ 日本語 \U0001f600 "quoted" back\\slash\n\ttab \x00 \x1f'},
    {"separators": "a\u2028b\u2029c"},
    {"at": dt.datetime(2026, 12, 6, 4, 30, 1, 123456, tzinfo=UTC)},
    {"at": dt.datetime(2026, 12, 6, 4, 30, 1, tzinfo=UTC)},
    {"at": dt.datetime(2026, 12, 6, 4, 30, tzinfo=dt.timezone(dt.timedelta(hours=2)))},
    {"naive": dt.datetime(2026, 12, 6, 4, 30), "day": dt.date(2026, 12, 6)},  # noqa: DTZ001
    {"id": uuid.UUID("12345678-1234-5678-1234-567812345678")},
    {"lazy": gettext_lazy("Not found."), "price": decimal.Decimal("1.50")},
    {"seconds": dt.timedelta(seconds=90)},
    {1: "an integer key", "nested": {"list": [True, False, None, 0, -1, 2**63 - 1]}},
    [],
    {},
]


@pytest.mark.parametrize("document", DOCUMENTS)
def test_the_same_bytes_as_drfs_renderer(document):
    assert JSONRenderer().render(document) == DrfRenderer().render(document)


def test_an_integer_beyond_64_bits_is_written_all_the_same():
    document = {"metadata": {"big": 2**70}}

    assert JSONRenderer().render(document) == b'{"metadata":{"big":1180591620717411303424}}'


def test_an_indent_asked_for_is_given():
    document = {"a": [1]}
    media_type = "application/json; indent=2"

    assert JSONRenderer().render(document, media_type) == DrfRenderer().render(document, media_type)


def test_nothing_is_an_empty_body():
    assert JSONRenderer().render(None) == b""


def test_the_api_answers_through_it(client, alice):
    client.force_login(alice)

    response = client.get("/api/v1/sessions/", {"limit": "0"})

    assert response.status_code == 200
    assert response.accepted_renderer.__class__ is JSONRenderer
    assert response.content == b'{"count":0,"next":null,"previous":null,"results":[]}'
