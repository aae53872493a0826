"""The checks every path shares (core.validation): JSON a user sends, times, searches."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta, timezone

import pytest

from core.errors import InvalidInput, TooLarge
from core.validation import (
    JSON_MAX_DEPTH,
    clean_json,
    clean_json_object,
    clean_metadata,
    clean_past_time,
    clean_search,
    clean_session_state,
    json_size,
    json_too_deep,
)


def nested(depth: int) -> dict:
    """An object nesting `depth` levels deep: {"a": {"a": ... {}}}."""
    value: dict = {}
    for _ in range(depth - 1):
        value = {"a": value}
    return value


def test_depth_counts_objects_and_lists():
    assert not json_too_deep("text", 0)
    assert not json_too_deep({"a": [1, {"b": []}]}, 4)
    assert json_too_deep({"a": [1, {"b": []}]}, 3)
    assert not json_too_deep(nested(JSON_MAX_DEPTH), JSON_MAX_DEPTH)
    assert json_too_deep(nested(JSON_MAX_DEPTH + 1), JSON_MAX_DEPTH)


def test_depth_of_a_value_far_deeper_than_pythons_recursion_limit_is_answered():
    value: list = []
    for _ in range(100_000):
        value = [value]
    assert json_too_deep(value, JSON_MAX_DEPTH)
    with pytest.raises(InvalidInput, match=f"nested more than {JSON_MAX_DEPTH} levels"):
        clean_json(value, what="metadata")


@pytest.mark.parametrize(
    ("value", "match"),
    [
        ({"note": "a\x00b"}, "The metadata cannot contain NUL characters."),
        ({"a\x00": 1}, "cannot contain NUL characters"),
        ({"deep": [{"x": "\x00"}]}, "cannot contain NUL characters"),
        ({"note": "\ud800"}, "cannot contain lone surrogates"),
        ({"\udfff": 1}, "cannot contain lone surrogates"),
        ({"n": float("nan")}, "NaN or infinite"),
        ({"n": [float("inf")]}, "NaN or infinite"),
        ({1: "a"}, "only have text keys"),
        ({"when": datetime(2020, 1, 1, tzinfo=UTC)}, "must be JSON"),
        (nested(JSON_MAX_DEPTH + 1), "nested more than"),
    ],
)
def test_what_no_database_or_page_can_hold_is_refused_with_the_reason(value, match):
    with pytest.raises(InvalidInput, match=match):
        clean_json_object(value, what="metadata")


def test_plain_json_passes_unchanged():
    value = {"tags": ["a", "ü", "🎉"], "n": 1.5, "ok": True, "none": None, "deep": nested(30)}
    assert clean_json_object(value, what="metadata") is value


def test_model_output_is_cleaned_instead_of_refused():
    value = {"a\x00": ["x\x00y", "\ud800"]}
    assert clean_json_object(value, what="state", model_output=True) == {"a": ["xy", "\ufffd"]}
    with pytest.raises(InvalidInput, match="nested more than"):
        clean_json_object(nested(JSON_MAX_DEPTH + 1), what="state", model_output=True)


def test_size_is_measured_as_compact_utf8_json():
    assert json_size({"a": "é"}) == len('{"a":"é"}'.encode())


def test_metadata_and_state_over_their_limits_are_too_large(settings):
    settings.ROLLBACK_METADATA_MAX_BYTES = 100
    settings.ROLLBACK_STATE_MAX_BYTES = 50
    fits = {"a": "x" * (100 - len('{"a":""}'))}
    assert json_size(fits) == 100
    assert clean_metadata(fits, what="session metadata") == fits
    with pytest.raises(TooLarge, match="The session metadata is 101 bytes as JSON; the limit"):
        clean_metadata({"a": "x" * 93}, what="session metadata")
    with pytest.raises(TooLarge, match="session state is 100 bytes"):
        clean_session_state(fits)
    assert TooLarge.code == "too_large"


@pytest.mark.parametrize(
    "text",
    [
        "9999-12-31T23:59:59-05:00",  # year 10000 in UTC: Python cannot hold it
        "0001-01-01T00:00:00+05:00",  # year 0 in UTC
        "1969-12-31T23:59:59+00:00",
        "2099-12-31T00:00:00+00:00",  # allowed by the database, but not yet happened
    ],
)
def test_a_time_outside_1970_to_tomorrow_is_refused(text):
    with pytest.raises(InvalidInput, match="out of range: times must lie between 1970-01-01"):
        clean_past_time(datetime.fromisoformat(text), what="created_at")


def test_times_in_range_pass_and_a_time_without_zone_is_utc():
    assert clean_past_time(datetime(1970, 1, 1, tzinfo=UTC), what="t") == datetime(
        1970, 1, 1, tzinfo=UTC
    )
    east = timezone(timedelta(hours=14))
    soon = datetime.now(east) + timedelta(hours=12)
    assert clean_past_time(soon, what="t") == soon
    naive = datetime(2020, 5, 1, 12, 0)  # noqa: DTZ001 - the point of the test
    assert clean_past_time(naive, what="t") == datetime(2020, 5, 1, 12, 0, tzinfo=UTC)


def test_a_search_is_trimmed_cut_and_refuses_nul():
    assert clean_search(None) == ""
    assert clean_search("  rome ") == "rome"
    assert clean_search("x" * 500) == "x" * 200
    with pytest.raises(InvalidInput, match=r"The search cannot contain NUL characters."):
        clean_search("a\x00")


def test_a_round_trip_through_json_keeps_what_passed():
    value = {"emoji": "🎉", "quote": '"<>&', "list": [1, 2.5, None]}
    clean = clean_json(value, what="metadata", max_bytes=1000)
    assert json.loads(json.dumps(clean)) == value
