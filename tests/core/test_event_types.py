"""The TypedDicts of core.events are the payloads the functions really send: one per event type,
naming the keys of the contract's shape (tests/core/test_events.py's SHAPES), so mypy checks
every reader of an event against what is sent."""

from __future__ import annotations

import types
import typing
from typing import Any, Literal, NotRequired, get_args, get_origin, get_type_hints

import pytest
from django.db import transaction

from core import events
from tests.core.test_events import SHAPES

pytestmark = pytest.mark.django_db(transaction=True)

PAYLOADS: list[Any] = list(get_args(events.Event))


def _hints(payload: Any) -> dict[str, Any]:
    # With `from __future__ import annotations` the class's own __optional_keys__ cannot see
    # NotRequired (Python 3.11): read the evaluated hints instead.
    return get_type_hints(payload, include_extras=True)


def _optional(payload: Any) -> set[str]:
    return {key for key, hint in _hints(payload).items() if get_origin(hint) is NotRequired}


def _type_of(payload: Any) -> str:
    hint = get_type_hints(payload)["type"]
    assert get_origin(hint) is Literal
    (name,) = get_args(hint)
    return str(name)


def test_each_event_type_has_one_typeddict_and_every_contract_event_has_one():
    names = [_type_of(payload) for payload in PAYLOADS]
    assert len(names) == len(set(names))
    assert set(SHAPES) | {"turn.cancelled"} == set(names)


@pytest.mark.parametrize("payload", PAYLOADS, ids=_type_of)
def test_each_typeddict_names_the_keys_of_its_events_shape(payload: Any):
    shape = SHAPES.get(_type_of(payload), {"session", "turn"})  # turn.cancelled: no more
    assert set(_hints(payload)) == shape | {"type"}
    # Every key is always sent, but for the numbering of a delta and its attempt (absent outside
    # a turn's stream).
    optional = {"seq", "attempt"} if _type_of(payload) == "message.delta" else set()
    assert _optional(payload) == optional


def _sent(send: Any) -> list[dict[str, Any]]:
    heard: list[dict[str, Any]] = []
    stop = events.listen(7, heard.append)
    try:
        with transaction.atomic():
            send()
    finally:
        stop()
    return heard


def _check(event: dict[str, Any]) -> None:
    payload = next(p for p in PAYLOADS if _type_of(p) == event["type"])
    hints = get_type_hints(payload)
    assert set(hints) - _optional(payload) <= set(event) <= set(hints)
    for key, value in event.items():
        hint = hints[key]
        if hint is object:
            continue
        unions = (Literal, typing.Union, types.UnionType)
        allowed = get_args(hint) if get_origin(hint) in unions else (hint,)
        if get_origin(hint) is Literal:
            assert value in allowed
        else:
            kinds = tuple(get_origin(a) or (type(None) if a is None else a) for a in allowed)
            assert isinstance(value, kinds), (key, value, hint)


def test_the_functions_send_what_their_typeddicts_say():
    sent = _sent(
        lambda: (
            events.turn_started(session=7, turn=1, branch=None, attempt=1),
            events.message_delta(session=7, turn=1, delta="Hel"),
            events.message_delta(session=7, turn=1, delta="lo", seq=2),
            events.tool_started(session=7, turn=1, tool="add", args={"a": 1}, call_id="c1"),
            events.tool_output(session=7, turn=1, tool="run_shell", run="r1", offset=0, text="1\n"),
            events.tool_finished(
                session=7, turn=1, tool="add", call_id="c1", result="2", error=False
            ),
            events.turn_finished(
                session=7,
                turn=1,
                reply="Hello",
                tools_used=["add"],
                checkpoint=None,
                rolled_back_to=None,
                finish_reason="stop",
            ),
            events.turn_failed(session=7, turn=1, error="boom"),
            events.turn_cancelled(session=7, turn=1),
            events.checkpoint_created(
                session=7, checkpoint=3, branch=2, name="a", is_auto=False, message_count=2
            ),
            events.checkpoints_deleted(session=7, checkpoints=[4, 3]),
            events.branch_changed(session=7, branch=2, checkpoint=3, deleted_checkpoints=[5]),
            events.session_changed(
                session=7, name="s", archived=False, pinned=True, metadata={"k": 1}
            ),
            events.tool_approval_requested(
                session=7,
                turn=1,
                tool_call_id="c2",
                tool_name="fs__drop",
                args={"p": "x"},
                call=1,
                attempt=1,
                note=None,
            ),
            events.tool_approval_answered(
                session=7, turn=1, tool_call_id="c2", approved=False, reason="refused"
            ),
            events.workspace_changed(session=7, branch=2, paths=["b.md", "a.txt", "a.txt"]),
        )
    )
    assert {event["type"] for event in sent} == {_type_of(p) for p in PAYLOADS}
    for event in sent:
        _check(event)
