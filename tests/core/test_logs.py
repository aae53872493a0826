"""core.logs: the ids of the work in hand on every record, one JSON object per line with
LOG_FORMAT=json, and the same ids in the text format."""

from __future__ import annotations

import io
import json
import logging
import threading
from datetime import UTC, datetime

import pytest

from core import logs


@pytest.fixture
def emit():
    """Log through a handler set up as settings.LOGGING sets up its own; what it wrote."""

    def run(formatter: logging.Formatter, *calls) -> str:
        stream = io.StringIO()
        handler = logging.StreamHandler(stream)
        handler.addFilter(logs.ContextFilter())
        handler.setFormatter(formatter)
        logger = logging.getLogger("tests.core.logs")
        logger.addHandler(handler)
        logger.propagate = False
        logger.setLevel(logging.DEBUG)
        try:
            for call in calls:
                call(logger)
        finally:
            logger.removeHandler(handler)
            logger.propagate = True
        return stream.getvalue()

    return run


def failing(logger: logging.Logger) -> None:
    try:
        raise ValueError("bad\nvalue")
    except ValueError:
        logger.exception("it failed\non two lines")


def test_json_is_one_object_per_line_with_the_ids_time_level_logger_and_message(emit):
    with logs.bound(request_id="r1", user_id=7, session_id=3, turn_id=12):
        out = emit(
            logs.JsonFormatter(),
            lambda log: log.info("hello %s", "world", extra={"latency_ms": 42}),
            failing,
        )
    lines = out.splitlines()
    assert len(lines) == 2  # a newline in a message or a traceback stays inside its line
    first, second = (json.loads(line) for line in lines)
    assert first == {
        "timestamp": first["timestamp"],
        "level": "INFO",
        "logger": "tests.core.logs",
        "message": "hello world",
        "request_id": "r1",
        "user_id": 7,
        "session_id": 3,
        "turn_id": 12,
        "latency_ms": 42,
    }
    stamp = datetime.fromisoformat(first["timestamp"])
    assert stamp.utcoffset().total_seconds() == 0
    assert abs((datetime.now(UTC) - stamp).total_seconds()) < 60
    assert second["level"] == "ERROR"
    assert second["message"] == "it failed\non two lines"
    assert second["turn_id"] == 12
    assert "ValueError: bad\nvalue" in second["exc_info"]


def test_json_leaves_out_ids_that_are_not_bound_and_djangos_request_object(emit):
    request = type("Request", (), {"request_id": "from-the-request"})()
    out = emit(
        logs.JsonFormatter(),
        lambda log: log.warning("Not Found: /x", extra={"status_code": 404, "request": request}),
        lambda log: log.info("plain"),
    )
    answered, plain = (json.loads(line) for line in out.splitlines())
    # Django logs 4xx answers after the middleware ended: the id comes from the request.
    assert answered["request_id"] == "from-the-request"
    assert answered["status_code"] == 404
    assert "request" not in answered
    assert "user_id" not in answered
    assert set(plain) == {"timestamp", "level", "logger", "message"}


def test_text_shows_the_ids_when_there_are_some(emit):
    with logs.bound(request_id="r1", turn_id=12):
        out = emit(
            logs.TextFormatter(),
            lambda log: log.info("turn finished", extra={"model": "m", "error": "it broke"}),
        )
    out += emit(logs.TextFormatter(), lambda log: log.info("no ids"))
    with_ids, without = out.splitlines()
    assert with_ids.endswith(
        'INFO tests.core.logs: turn finished request_id=r1 turn_id=12 model=m error="it broke"'
    )
    assert without.endswith("INFO tests.core.logs: no ids")
    assert datetime.fromisoformat(with_ids.split(" ")[0]).utcoffset().total_seconds() == 0


def test_bound_ids_are_put_back_when_the_block_ends_whatever_bind_did_inside():
    assert logs.current() == {}
    with logs.bound(request_id="outer", user_id=None):
        logs.bind(user_id=5)  # as the API's authentication does, inside the request
        with logs.bound(turn_id=9, session_id=2):
            assert logs.current() == {
                "request_id": "outer",
                "user_id": 5,
                "session_id": 2,
                "turn_id": 9,
            }
        assert logs.current() == {"request_id": "outer", "user_id": 5}
    assert logs.current() == {}
    with pytest.raises(TypeError, match="not a log context field: colour"):
        logs.bind(colour="red")


def test_a_value_given_with_the_call_wins_over_the_bound_one():
    record = logging.LogRecord("x", logging.INFO, __file__, 1, "m", None, None)
    record.turn_id = 99
    with logs.bound(turn_id=1, session_id=2):
        assert logs.ContextFilter().filter(record)
    assert (record.turn_id, record.session_id) == (99, 2)


def test_a_thread_started_in_this_context_carries_its_ids_a_plain_thread_does_not():
    seen: dict[str, dict] = {}

    def look(name: str) -> None:
        seen[name] = logs.current()

    with logs.bound(turn_id=4):
        threads = [
            threading.Thread(target=logs.in_this_context(look), args=("copied",)),
            threading.Thread(target=look, args=("plain",)),
        ]
        for thread in threads:
            thread.start()
            thread.join()
    assert seen == {"copied": {"turn_id": 4}, "plain": {}}
