"""One source of events: every path that changes something (a page, the API, an agent tool, the
admin, a job) sends the same event of the contract's shape, once, on the channel layer, and only
after its transaction commits. A refused or rolled-back change sends nothing."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from asgiref.sync import async_to_sync
from channels.db import database_sync_to_async
from channels.layers import get_channel_layer
from django.db import transaction
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from agents.rollback_agent import RollbackAgent
from checkpoints.models import Checkpoint
from checkpoints.services import checkpoint_create
from core.events import group_name
from ops.tasks import archive_idle_sessions_task, prune_auto_checkpoints_task
from sessions_app.models import Branch, Session, Turn
from sessions_app.selectors import current_branch
from tests.conftest import say
from tests.fakes.chat_server import Reply, ToolCall, ToolCalls
from tests.web.api.conftest import bearer_client

pytestmark = pytest.mark.django_db(transaction=True)

HX = {"HTTP_HX_REQUEST": "true"}

# The contract's shape of each event type: its keys.
SHAPES = {
    "checkpoint.created": {"session", "checkpoint", "branch", "name", "is_auto", "message_count"},
    "checkpoint.deleted": {"session", "checkpoints"},
    "branch.changed": {"session", "branch", "checkpoint", "deleted_checkpoints"},
    "session.changed": {"session", "name", "archived", "pinned", "metadata"},
    "turn.started": {"session", "turn", "branch", "attempt"},
    "turn.finished": {"session", "turn", "status", "finish_reason", "reply", "tools_used",
                      "checkpoint", "rolled_back_to"},
    "turn.failed": {"session", "turn", "error"},
    "message.delta": {"session", "turn", "delta", "seq", "attempt"},
    "tool.started": {"session", "turn", "tool", "args", "call_id"},
    "tool.finished": {"session", "turn", "tool", "call_id", "result", "error"},
    # Not the contract's: a running command's output (agents.shell_tools.LiveOutput).
    "tool.output": {"session", "turn", "tool", "run", "offset", "text"},
    "tool.approval_requested": {
        "session",
        "turn",
        "tool_call_id",
        "tool_name",
        "args",
        "call",
        "attempt",
        "note",
    },
    "tool.approval_answered": {"session", "turn", "tool_call_id", "approved", "reason"},
    "workspace.changed": {"session", "branch", "paths"},
}  # fmt: skip


def heard(session_id: int, action: Callable[[], Any]) -> list[dict]:
    """Run `action` (in a thread, as a request or a worker would) while listening to the
    session's group on the channel layer; every event it sent, in order."""

    async def run() -> list[dict]:
        layer = get_channel_layer()
        channel = await layer.new_channel()
        await layer.group_add(group_name(session_id), channel)
        await database_sync_to_async(action)()
        got = []
        while True:
            try:
                message = await asyncio.wait_for(layer.receive(channel), timeout=0.5)
            except TimeoutError:
                break
            got.append(message["event"])
        await layer.group_discard(group_name(session_id), channel)
        return got

    events = async_to_sync(run)()
    for event in events:
        assert set(event) - {"type"} == SHAPES[event["type"]], event
        assert event["session"] == session_id
    return events


def of(events: list[dict], kind: str) -> list[dict]:
    return [e for e in events if e["type"] == kind]


def kinds(events: list[dict]) -> list[str]:
    return [e["type"] for e in events]


@pytest.fixture
def page(alice):
    client = Client()
    client.force_login(alice)
    return client


@pytest.fixture
def api(alice):
    return bearer_client(alice)


@pytest.fixture
def talked(branch):
    say(branch, "hello", "hi there", "more", "sure")
    branch.refresh_from_db()
    return branch


# --- checkpoint.created ------------------------------------------------------------------------


def test_a_checkpoint_saved_on_the_page_is_announced_once(page, session, talked):
    url = reverse("chat:checkpoint_save", args=[session.pk])
    events = heard(session.pk, lambda: page.post(url, {"name": "mark"}, **HX))
    [created] = events
    cp = Checkpoint.objects.get()
    assert created == {
        "type": "checkpoint.created",
        "session": session.pk,
        "checkpoint": cp.pk,
        "branch": talked.pk,
        "name": "mark",
        "is_auto": False,
        "message_count": 4,
    }


def test_a_checkpoint_made_through_the_api_is_announced_once(api, session, talked):
    url = f"/api/v1/sessions/{session.pk}/checkpoints/"
    events = heard(session.pk, lambda: api.post(url, {"name": "api"}, format="json"))
    assert kinds(events) == ["checkpoint.created"]
    assert events[0]["name"] == "api"


def test_a_checkpoint_the_agent_tool_makes_is_announced_once(session, talked):
    agent = RollbackAgent(external_session_id=session.pk, model=None, skip_session_creation=True)
    events = heard(session.pk, lambda: agent.create_checkpoint("by the tool"))
    assert kinds(events) == ["checkpoint.created"]
    assert events[0]["name"] == "by the tool"


def test_a_tool_turn_announces_its_stream_its_automatic_checkpoint_and_its_end(
    fake_llm, settings, session, talked
):
    from agents.worker import run_turn
    from sessions_app.turns import turn_start

    fake_llm.queue(
        ToolCalls([ToolCall("write_file", {"path": "a.md", "content": "x"})]), Reply("Written.")
    )
    turn = turn_start(session=session, message="6*7?")
    events = heard(session.pk, lambda: run_turn(turn.pk))
    assert kinds(events) == [
        "turn.started",
        "tool.started",
        "workspace.changed",
        "tool.finished",
        "message.delta",
        "checkpoint.created",
        "turn.finished",
    ]
    auto = Checkpoint.objects.get(is_auto=True)
    assert of(events, "checkpoint.created")[0]["checkpoint"] == auto.pk
    assert of(events, "turn.finished")[0]["checkpoint"] == auto.pk
    assert of(events, "turn.finished")[0]["finish_reason"] == "stop"


# --- checkpoint.deleted ------------------------------------------------------------------------


@pytest.fixture
def mark(talked):
    return checkpoint_create(branch=talked, name="mark")


def test_deleting_a_checkpoint_is_announced_once_whichever_way(
    page, api, admin_client, session, talked
):
    agent = RollbackAgent(external_session_id=session.pk, model=None, skip_session_creation=True)
    ways = {
        "page": lambda cp: page.post(reverse("chat:checkpoint_delete", args=[cp.pk]), **HX),
        "api": lambda cp: api.delete(f"/api/v1/checkpoints/{cp.pk}/"),
        "agent tool": lambda cp: agent.delete_checkpoint_tool(cp.pk),
        "admin": lambda cp: admin_client.post(
            reverse("admin:checkpoints_checkpoint_changelist"),
            {"action": "delete_checkpoints", "_selected_action": [cp.pk]},
        ),
    }
    for way, delete in ways.items():
        cp = checkpoint_create(branch=talked, name=way)
        events = heard(session.pk, lambda cp=cp, delete=delete: delete(cp))
        assert events == [
            {"type": "checkpoint.deleted", "session": session.pk, "checkpoints": [cp.pk]}
        ], way
        assert not Checkpoint.objects.filter(pk=cp.pk).exists()


def test_the_retention_job_and_the_cleanup_tool_announce_what_they_deleted(session, talked):
    autos = [checkpoint_create(branch=talked, name=f"a{i}", is_auto=True) for i in range(4)]
    Checkpoint.objects.filter(pk__in=[c.pk for c in autos]).update(
        created_at=timezone.now() - timedelta(days=30)
    )
    job = prune_auto_checkpoints_task.apply
    events = heard(session.pk, lambda: job(kwargs={"keep_latest": 2, "days": 7}))
    oldest = [c.pk for c in autos[:2]]
    assert events == [{"type": "checkpoint.deleted", "session": session.pk, "checkpoints": oldest}]
    agent = RollbackAgent(external_session_id=session.pk, model=None, skip_session_creation=True)
    events = heard(session.pk, lambda: agent.cleanup_auto_checkpoints_tool(keep_latest=1))
    assert events == [
        {"type": "checkpoint.deleted", "session": session.pk, "checkpoints": [autos[2].pk]}
    ]
    assert heard(session.pk, lambda: agent.cleanup_auto_checkpoints_tool(keep_latest=1)) == []


def test_the_archiving_job_announces_the_session_archived(session):
    Session.objects.filter(pk=session.pk).update(updated_at=timezone.now() - timedelta(days=40))
    events = heard(session.pk, lambda: archive_idle_sessions_task.apply(kwargs={"days": 30}))
    assert events == [
        {
            "type": "session.changed",
            "session": session.pk,
            "name": session.session_name,
            "archived": True,
            "pinned": False,
            "metadata": session.metadata,
        }
    ]


# --- branch.changed ----------------------------------------------------------------------------


def test_restoring_is_announced_once_on_the_page_and_through_the_api(
    page, api, session, talked, mark
):
    url = reverse("chat:checkpoint_restore", args=[mark.pk])
    events = heard(session.pk, lambda: page.post(url, {"mode": "branch"}, **HX))
    new = current_branch(session)
    assert events == [
        {"type": "branch.changed", "session": session.pk, "branch": new.pk,
         "checkpoint": mark.pk, "deleted_checkpoints": []}
    ]  # fmt: skip
    events = heard(
        session.pk,
        lambda: api.post(f"/api/v1/checkpoints/{mark.pk}/restore/", {"mode": "branch"}, "json"),
    )
    assert kinds(events) == ["branch.changed"]


def test_a_rewind_announces_the_branch_and_the_checkpoints_it_deleted(api, session, talked):
    early = checkpoint_create(branch=talked, name="early", at=2)
    late = checkpoint_create(branch=talked, name="late")
    url = f"/api/v1/checkpoints/{early.pk}/restore/"
    events = heard(session.pk, lambda: api.post(url, {"mode": "rewind"}, format="json"))
    assert events == [
        {"type": "branch.changed", "session": session.pk, "branch": talked.pk,
         "checkpoint": early.pk, "deleted_checkpoints": [late.pk]},
        {"type": "checkpoint.deleted", "session": session.pk, "checkpoints": [late.pk]},
    ]  # fmt: skip


def test_switching_branch_is_announced_once_on_the_page_and_through_the_api(
    page, api, session, talked, mark
):
    from checkpoints.services import checkpoint_restore

    checkpoint_restore(checkpoint=mark)
    url = reverse("chat:activate", args=[session.pk, talked.pk])
    events = heard(session.pk, lambda: page.post(url, **HX))
    assert kinds(events) == ["branch.changed"]
    assert events[0]["branch"] == talked.pk
    other = Branch.objects.exclude(pk=talked.pk).get()
    events = heard(session.pk, lambda: api.post(f"/api/v1/branches/{other.pk}/activate/"))
    assert kinds(events) == ["branch.changed"]
    assert events[0]["branch"] == other.pk


def test_renaming_a_branch_is_announced_once_as_branch_changed_naming_the_current_branch(
    page, api, session, talked, mark
):
    """A rename moves no branch: the event names the branch that stays current (so no watcher
    thinks the view switched) and tells watchers to read the branches again; the refused rename
    sends nothing."""
    from checkpoints.services import checkpoint_restore

    restored = checkpoint_restore(checkpoint=mark).branch  # current; `talked` is not
    url = reverse("chat:branch_rename", args=[session.pk, talked.pk])
    events = heard(session.pk, lambda: page.post(url, {"name": "old line"}, **HX))
    assert events == [
        {"type": "branch.changed", "session": session.pk, "branch": restored.pk,
         "checkpoint": None, "deleted_checkpoints": []}
    ]  # fmt: skip
    rename = f"/api/v1/branches/{talked.pk}/"
    events = heard(session.pk, lambda: api.patch(rename, {"name": "line"}, format="json"))
    assert kinds(events) == ["branch.changed"]
    assert events[0]["branch"] == restored.pk
    assert heard(session.pk, lambda: api.patch(rename, {"name": ""}, format="json")) == []


def test_editing_a_message_announces_the_new_branch_then_the_turn(
    page, session, talked, inline_turns, fake_llm
):
    first = talked.messages.get(position=0)
    url = reverse("chat:edit", args=[session.pk, first.pk])
    events = heard(session.pk, lambda: page.post(url, {"message": "hello again"}, **HX))
    fork = current_branch(session)
    assert fork.pk != talked.pk
    assert kinds(events)[:2] == ["branch.changed", "turn.started"]
    assert kinds(events)[-1] == "turn.finished"
    assert of(events, "branch.changed") == [
        {"type": "branch.changed", "session": session.pk, "branch": fork.pk,
         "checkpoint": None, "deleted_checkpoints": []}
    ]  # fmt: skip


def test_a_rollback_the_agent_makes_is_announced_once(fake_llm, session, talked, mark):
    from agents.worker import run_turn
    from sessions_app.turns import turn_start

    fake_llm.queue(
        ToolCalls([ToolCall("rollback_to_checkpoint_tool", {"checkpoint_id_or_name": "mark"})]),
        Reply("Rolled back."),
    )
    turn = turn_start(session=session, message="roll back to mark")
    events = heard(session.pk, lambda: run_turn(turn.pk))
    [changed] = of(events, "branch.changed")
    assert changed["checkpoint"] == mark.pk
    assert changed["branch"] == current_branch(session).pk
    assert kinds(events)[-2:] == ["branch.changed", "turn.finished"]


# --- session.changed ---------------------------------------------------------------------------


def test_renaming_is_announced_once_on_the_page_through_the_api_and_in_the_admin(
    page, api, admin_client, session
):
    page_rename = lambda: page.post(  # noqa: E731
        reverse("chat:rename", args=[session.pk]), {"name": "From the page"}, **HX
    )
    api_rename = lambda: api.patch(  # noqa: E731
        f"/api/v1/sessions/{session.pk}/", {"name": "From the API"}, format="json"
    )
    admin_rename = lambda: admin_client.post(  # noqa: E731
        reverse("admin:sessions_app_session_change", args=[session.pk]),
        {
            "session_name": "From the admin",
            "metadata": "{}",
            "branches-TOTAL_FORMS": "0",
            "branches-INITIAL_FORMS": "0",
        },
    )
    for rename, name in (
        (page_rename, "From the page"),
        (api_rename, "From the API"),
        (admin_rename, "From the admin"),
    ):
        assert heard(session.pk, rename) == [
            {"type": "session.changed", "session": session.pk, "name": name, "archived": False,
             "pinned": False, "metadata": {}}
        ], name  # fmt: skip


def test_archiving_is_announced_once_on_the_page_and_through_the_api(page, api, session):
    url = f"/api/v1/sessions/{session.pk}/"
    actions = [
        (lambda: page.post(reverse("chat:archive", args=[session.pk]), **HX), True),
        (lambda: page.post(reverse("chat:unarchive", args=[session.pk]), **HX), False),
        (lambda: api.patch(url, {"archived": True}, format="json"), True),
        (lambda: api.patch(url, {"archived": False}, format="json"), False),
    ]
    for action, archived in actions:
        assert heard(session.pk, action) == [
            {"type": "session.changed", "session": session.pk, "name": "Python basics",
             "archived": archived, "pinned": False, "metadata": {}}
        ]  # fmt: skip


def test_pinning_is_announced_once_on_the_page_and_through_the_api(page, api, session):
    url = f"/api/v1/sessions/{session.pk}/"
    actions = [
        (lambda: page.post(reverse("chat:pin", args=[session.pk]), **HX), True),
        (lambda: page.post(reverse("chat:unpin", args=[session.pk]), **HX), False),
        (lambda: api.patch(url, {"pinned": True}, format="json"), True),
        (lambda: api.patch(url, {"pinned": False}, format="json"), False),
    ]
    for action, pinned in actions:
        assert heard(session.pk, action) == [
            {"type": "session.changed", "session": session.pk, "name": "Python basics",
             "archived": False, "pinned": pinned, "metadata": {}}
        ]  # fmt: skip


# --- turns -------------------------------------------------------------------------------------


def test_a_turn_sent_through_the_api_is_announced_from_start_to_end(
    api, session, fake_llm, inline_turns
):
    fake_llm.queue(Reply("Hello you"))
    url = f"/api/v1/sessions/{session.pk}/turns/"
    events = heard(session.pk, lambda: api.post(url, {"message": "hi", "wait": True}, "json"))
    assert kinds(events) == ["turn.started", "message.delta", "message.delta", "turn.finished"]
    turn = Turn.objects.get()
    assert of(events, "turn.finished")[0] == {
        "type": "turn.finished", "session": session.pk, "turn": turn.pk, "status": "done",
        "finish_reason": "stop", "reply": "Hello you", "tools_used": [], "checkpoint": None,
        "rolled_back_to": None,
    }  # fmt: skip


def test_a_failed_turn_is_announced_once(api, session, fake_llm, settings, inline_turns):
    settings.AGENT_MAX_RETRIES = 0
    from tests.fakes.chat_server import Error

    fake_llm.queue(Error(400, "no such thing"))
    url = f"/api/v1/sessions/{session.pk}/turns/"
    events = heard(session.pk, lambda: api.post(url, {"message": "hi", "wait": True}, "json"))
    assert kinds(events) == ["turn.started", "turn.failed"]
    assert "no such thing" in events[-1]["error"]


# --- nothing for what did not happen -----------------------------------------------------------


def test_a_rolled_back_change_sends_nothing(session, talked):
    def change_then_fail() -> None:
        with pytest.raises(RuntimeError, match="rolled back"):
            change_in_a_failing_transaction()

    def change_in_a_failing_transaction() -> None:
        with transaction.atomic():
            checkpoint_create(branch=talked, name="never")
            raise RuntimeError("rolled back")

    assert heard(session.pk, change_then_fail) == []
    assert not Checkpoint.objects.exists()


def test_refused_actions_send_nothing(api, bob, session, talked, mark):
    other = bearer_client(bob)
    refused = [
        lambda: api.post(f"/api/v1/checkpoints/{mark.pk}/restore/", {"mode": "x"}, "json"),
        lambda: api.post(
            f"/api/v1/sessions/{session.pk}/checkpoints/", {"description": "d" * 10_001}, "json"
        ),
        lambda: other.delete(f"/api/v1/checkpoints/{mark.pk}/"),
        lambda: other.patch(f"/api/v1/sessions/{session.pk}/", {"name": "mine"}, "json"),
        lambda: api.patch(f"/api/v1/sessions/{session.pk}/", {"name": "n" * 500}, "json"),
    ]
    for act in refused:
        assert heard(session.pk, act) == []
    assert Checkpoint.objects.filter(pk=mark.pk).exists()


@pytest.mark.redis
def test_sync_code_publishes_through_one_loop_in_order(settings):
    # A worker's turn publishes each streamed token from sync code: through the one bridge loop
    # of the process (a new loop, and Redis connection, per message cost ~4 ms each).
    import threading

    from core import bridge, events

    layer = get_channel_layer()
    channel = async_to_sync(layer.new_channel)()
    async_to_sync(layer.group_add)(events.group_name(9005), channel)
    for i in range(30):
        events.message_delta(session=9005, turn=1, delta=f"t{i} ", seq=i + 1)
    bridges = [t for t in threading.enumerate() if t.name == bridge.THREAD_NAME]
    assert len(bridges) == 1

    async def collect() -> list[int]:
        return [(await layer.receive(channel))["event"]["seq"] for _ in range(30)]

    assert async_to_sync(collect)() == list(range(1, 31))
    assert [t for t in threading.enumerate() if t.name == bridge.THREAD_NAME] == bridges
