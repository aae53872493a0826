"""Importing other apps' exports (checkpoints.foreign): ChatGPT, Open WebUI and LibreChat
conversations become sessions whose branches are their trees; what is not text is left out and
counted; a bad document writes nothing; a job imports each conversation on its own."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest

from checkpoints.foreign.formats import skipped_lines
from checkpoints.foreign.services import history_import, import_job_run
from checkpoints.models import ImportJob
from sessions_app.errors import ImportRejected, ImportTooLarge, MessageTooLong
from sessions_app.models import Branch, Message, Session
from sessions_app.selectors import branch_history

from .foreign_exports import (
    CURRENT,
    EDITED_AWAY,
    OLDER_REPLY,
    T0,
    chatgpt_conversation,
    chatgpt_export,
    chatgpt_with_extras,
    librechat_export,
    openwebui_chat,
)

pytestmark = pytest.mark.django_db


def tree_of(session: Session) -> list[tuple[int | None, int, bool, list[str]]]:
    """Each branch, oldest first: the index of its parent, its fork position, whether it is
    current, and its whole history's texts (inherited ones included)."""
    branches = list(Branch.objects.filter(session=session).order_by("id"))
    index = {b.pk: i for i, b in enumerate(branches)}
    return [
        (
            index[b.parent_id] if b.parent_id else None,
            b.fork_position,
            b.is_current,
            [m.content for m in branch_history(b)],
        )
        for b in branches
    ]


THE_TREE = [
    (None, 0, True, CURRENT),
    (0, 2, False, EDITED_AWAY),
    (0, 3, False, OLDER_REPLY),
]


def test_a_chatgpt_conversation_with_an_edit_and_a_regeneration_is_a_session_of_three_branches(
    alice,
):
    imported = history_import(owner=alice, raw=chatgpt_export(chatgpt_conversation()))
    session = imported.session
    assert session.session_name == "Trip to Lisbon"
    assert session.created_at == datetime.fromtimestamp(T0, UTC)
    assert tree_of(session) == THE_TREE
    # No message is copied: one row per message of the tree (4 on the current branch, 2 on the
    # edit's fork, 1 on the regeneration's).
    assert Message.objects.filter(branch__session=session).count() == 7
    roles = [m.role for m in branch_history(Branch.objects.get(session=session, is_current=True))]
    assert roles == ["user", "assistant", "user", "assistant"]
    first = Message.objects.get(branch__session=session, content="Q1")
    assert first.created_at == datetime.fromtimestamp(T0 + 1, UTC)
    # The (hidden) system message is left out, and said so.
    assert imported.skipped == {"system": 1}


def test_the_current_node_chooses_the_current_branch(alice):
    """current_node on the older reply: that path is the current branch."""
    raw = chatgpt_export(chatgpt_conversation(current_node="a2"))
    session = history_import(owner=alice, raw=raw).session
    current = Branch.objects.get(session=session, is_current=True)
    assert [m.content for m in branch_history(current)] == OLDER_REPLY
    assert current.parent_id is None
    assert len(tree_of(session)) == 3


def test_an_open_webui_chat_with_an_edit_and_a_regeneration_is_the_same_tree(alice):
    imported = history_import(owner=alice, raw=json.dumps([openwebui_chat()]))
    assert tree_of(imported.session) == THE_TREE
    assert imported.session.created_at == datetime.fromtimestamp(T0, UTC)
    # The question's two files: an attachment and an image, left out.
    assert imported.skipped == {"attachment": 1, "image": 1}


@pytest.mark.parametrize("recursive", [False, True], ids=["messages", "recursive tree"])
def test_a_librechat_conversation_is_the_same_tree_its_newest_leaf_current(alice, recursive):
    raw = json.dumps(librechat_export(recursive=recursive))
    session = history_import(owner=alice, raw=raw).session
    assert session.session_name == "Trip to Lisbon"
    assert tree_of(session) == THE_TREE
    assert session.created_at == datetime(2023, 11, 14, 22, 14, 20, tzinfo=UTC)


def test_images_attachments_tools_and_code_are_left_out_and_counted(alice):
    imported = history_import(owner=alice, raw=chatgpt_export(chatgpt_with_extras()))
    assert tree_of(imported.session) == [(None, 0, True, ["What is in this picture?", "A cat."])]
    assert imported.skipped == {
        "image": 1,
        "attachment": 1,
        "part:code": 1,
        "tool": 2,
    }
    assert skipped_lines(imported.skipped) == [
        "2 tool calls and results",
        "1 attachment",
        "1 image",
        "1 part of type code",
    ]


def test_a_title_is_bounded_and_untitled_when_missing(alice):
    long = history_import(owner=alice, raw=chatgpt_export(chatgpt_conversation("x" * 500)))
    assert len(long.session.session_name) == 200
    none = history_import(owner=alice, raw=chatgpt_export(chatgpt_conversation(title=None)))
    assert none.session.session_name == "Untitled"


def _broken(mutate) -> bytes:
    conversation = chatgpt_conversation()
    mutate(conversation["mapping"])
    return chatgpt_export(conversation)


def _cycle(mapping):
    mapping["q1"]["parent"] = "a1"


def _orphan(mapping):
    mapping["a3"]["parent"] = "nowhere"


def _nothing(mapping):
    for node in mapping.values():
        node["message"] = None


@pytest.mark.parametrize(
    ("raw", "error", "says"),
    [
        (b"{nope", ImportRejected, "not valid JSON"),
        (b'"text"', ImportRejected, "nor a ChatGPT"),
        (b"[1, 2]", ImportRejected, "nor a ChatGPT"),
        (b"[]", ImportRejected, "no conversation"),
        (_broken(_cycle), ImportRejected, "form a cycle"),
        (_broken(_orphan), ImportRejected, "names parent 'nowhere', which is not in"),
        (_broken(_nothing), ImportRejected, "no message to import"),
        (
            json.dumps([{"title": "t", "chat": {"nothing": 1}}]).encode(),
            ImportRejected,
            "no 'history'",
        ),
        (
            json.dumps({"conversationId": "c", "messages": [{"text": "hi"}]}).encode(),
            ImportRejected,
            "no 'messageId'",
        ),
    ],
    ids=[
        "not json",
        "a string",
        "a list of numbers",
        "an empty list",
        "a cycle",
        "a missing parent",
        "no message",
        "open webui without history",
        "librechat without ids",
    ],
)
def test_a_bad_document_is_refused_saying_why_and_nothing_is_written(alice, raw, error, says):
    with pytest.raises(error) as caught:
        history_import(owner=alice, raw=raw)
    assert says in caught.value.message
    assert not Session.objects.exists()
    assert not ImportJob.objects.exists()


def test_the_bounds_are_413s_and_nothing_is_written(alice, settings):
    settings.ROLLBACK_IMPORT_MAX_MESSAGES = 5
    with pytest.raises(ImportTooLarge, match="9 messages; the limit is 5"):
        history_import(owner=alice, raw=chatgpt_export(chatgpt_conversation()))
    settings.ROLLBACK_IMPORT_MAX_MESSAGES = 100
    settings.ROLLBACK_IMPORT_MAX_CONVERSATIONS = 2
    three = chatgpt_export(*(chatgpt_conversation(f"c{i}") for i in range(3)))
    with pytest.raises(ImportTooLarge, match="3 conversations; the limit is 2"):
        history_import(owner=alice, raw=three)
    settings.ROLLBACK_IMPORT_MAX_BYTES = 100
    with pytest.raises(ImportTooLarge, match="the limit is 100 bytes"):
        history_import(owner=alice, raw=chatgpt_export(chatgpt_conversation()))
    settings.ROLLBACK_IMPORT_MAX_BYTES = 10**7
    settings.AGENT_MAX_INPUT_CHARS = 3
    with pytest.raises(MessageTooLong, match="message 'q2a' of the conversation"):
        history_import(owner=alice, raw=chatgpt_export(chatgpt_conversation()))
    assert not Session.objects.exists()
    assert not ImportJob.objects.exists()


def test_rollbacks_own_export_still_imports(alice):
    from checkpoints.transfer import session_export
    from sessions_app.services import message_append, session_create

    original = session_create(owner=alice, name="mine")
    message_append(branch=Branch.objects.get(session=original), role="user", content="hello")
    imported = history_import(owner=alice, raw=json.dumps(session_export(session=original)))
    assert imported.session.session_name == "mine (imported)"
    assert imported.skipped == {}


def test_several_conversations_are_a_job_each_in_its_own_transaction(alice, settings):
    settings.ROLLBACK_MAX_SESSIONS_PER_USER = 3
    broken = chatgpt_conversation("broken")
    broken["mapping"]["a3"]["parent"] = "nowhere"
    raw = chatgpt_export(
        chatgpt_conversation("one"),
        broken,
        chatgpt_with_extras(),
        {"neither": "this"},
        chatgpt_conversation("two"),
        chatgpt_conversation("over the limit"),
    )
    job = history_import(owner=alice, raw=raw, filename="conversations.json")
    assert isinstance(job, ImportJob)
    assert (job.status, job.total, job.done, job.source) == ("queued", 6, 0, "chatgpt")
    assert not Session.objects.exists()  # nothing before the job runs

    job = import_job_run(job_id=job.pk)
    assert (job.status, job.done) == ("done", 6)
    names = [Session.objects.get(pk=pk).session_name for pk in job.sessions]
    assert names == ["one", "Picture", "two"]
    assert tree_of(Session.objects.get(pk=job.sessions[0])) == THE_TREE
    assert [(f["index"], f["title"]) for f in job.failures] == [
        (1, "broken"),
        (3, ""),
        (5, "over the limit"),
    ]
    assert "which is not in the conversation" in job.failures[0]["error"]
    assert "is not a ChatGPT, Open WebUI or LibreChat conversation" in job.failures[1]["error"]
    assert "You have 3 sessions" in job.failures[2]["error"]
    # The broken conversation wrote nothing: three sessions, and only their branches.
    assert Session.objects.count() == 3
    assert job.skipped == {"system": 2, "image": 1, "attachment": 1, "part:code": 1, "tool": 2}
    assert job.document == b""
    assert job.finished_at is not None
    # A task delivered twice runs the job once.
    assert import_job_run(job_id=job.pk) is None
    assert Session.objects.count() == 3


def test_a_thousand_conversations_import_in_one_job(alice):
    raw = chatgpt_export(*(chatgpt_conversation(f"c{i}") for i in range(1000)))
    job = history_import(owner=alice, raw=raw)
    job = import_job_run(job_id=job.pk)
    assert (job.status, job.done, len(job.sessions), job.failures) == ("done", 1000, 1000, [])
    assert Branch.objects.filter(session__owner=alice).count() == 3000
