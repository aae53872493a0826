"""What an error says can always be sent (core.errors, core.api, core.parsers)."""

from __future__ import annotations

import io

import pytest
from rest_framework.exceptions import ParseError, ValidationError

from core.api import exception_handler
from core.errors import InvalidInput, renderable
from core.parsers import JSONParser
from core.validation import lone_surrogate_at


def test_a_domain_error_quoting_a_lone_surrogate_says_it_as_an_escape():
    error = InvalidInput("Unknown field \ud800x and \udfff.")
    assert error.message == "Unknown field \\ud800x and \\udfff."
    assert str(error) == error.message
    error.message.encode("utf-8")  # no UnicodeEncodeError


def test_renderable_keeps_text_without_surrogates_as_it_is():
    text = "héllo 🎉 \\ud800"
    assert renderable(text) is text


def test_drf_errors_quoting_a_lone_surrogate_are_escaped_keys_included():
    response = exception_handler(ValidationError({"\ud800": ["Unknown field \udc00."]}), {})
    assert response is not None
    assert response.status_code == 400
    assert response.data == {
        "detail": "\\ud800: Unknown field \\udc00.",
        "errors": {"\\ud800": ["Unknown field \\udc00."]},
    }


@pytest.mark.parametrize(
    ("value", "where"),
    [
        ({"a": "ok", "b": {"c": ["x", "y\ud800"]}}, "b.c[1]"),
        ({"\udfff": 1}, "\udfff"),
        ({"a": {"k\ud800": None}}, "a.k\ud800"),
        (["\ud800"], "[0]"),
        ("\ud800", "(the value)"),
        ({"first": "\ud800", "second": "\udc00"}, "first"),
        ({"a": ["🎉", "é"], "b": 1.5, "c": None}, None),
    ],
)
def test_lone_surrogate_at_names_the_first_place(value, where):
    assert lone_surrogate_at(value) == where


def test_the_json_parser_refuses_a_lone_surrogate_saying_where():
    with pytest.raises(ParseError) as caught:
        JSONParser().parse(io.BytesIO(b'{"a": [{"\\ud800": 1}]}'))
    assert str(caught.value.detail) == (
        "JSON parse error - the body holds a lone surrogate (U+D800 to U+DFFF), which is not "
        "valid Unicode, at a[0].\\ud800."
    )
    assert JSONParser().parse(io.BytesIO(b'{"a": "\\ud83c\\udf89"}')) == {"a": "🎉"}
