"""Branches on the chat page: names and labels, renaming in place, the version switcher on a
message, the rewind dialog naming the branch it cuts, and the notice after the agent's rollback."""

from __future__ import annotations

import html
import re

import pytest
from django.urls import reverse

from checkpoints.services import checkpoint_create
from sessions_app.models import Branch
from sessions_app.selectors import current_branch
from sessions_app.services import branch_activate, branch_fork
from sessions_app.turns import turn_start
from tests.conftest import say
from tests.fakes.chat_server import Reply, ToolCall, ToolCalls
from web import chat_state as pages
from web.ws.consumers import render_event

pytestmark = pytest.mark.django_db
HX = {"HTTP_HX_REQUEST": "true"}


@pytest.fixture
def as_alice(client, alice):
    client.force_login(alice)
    return client


@pytest.fixture
def talked(branch):
    say(branch, "one", "reply one", "two", "reply two")
    branch.refresh_from_db()
    return branch


def _page(client, session) -> str:
    return html.unescape(client.get(reverse("chat:session", args=[session.pk])).content.decode())


def _text(fragment: str) -> str:
    return " ".join(re.sub(r"<[^>]+>", "", html.unescape(fragment)).split())


def test_the_tree_and_the_header_use_the_same_labels_without_database_ids(
    as_alice, session, talked
):
    mark = checkpoint_create(branch=talked, name="start")
    branch_fork(branch=talked, position=2, forked_from_id=mark.pk)
    edit = branch_fork(branch=talked, position=2, metadata={"edited_message": 3})
    page = _page(as_alice, session)
    labels = re.findall(r'data-testid="branch-label">([^<]*)<', page)
    assert labels == ["main", "from “start”", "edit of message 3"]
    header = re.search(r'data-testid="current-branch"[^>]*>([^<]*)<', page)
    assert header is not None
    assert header.group(1).startswith("edit of message 3 ·")
    assert f"branch {edit.pk}" not in page


def test_renaming_from_the_tree_shows_the_name_in_the_tree_and_the_header(
    as_alice, session, talked
):
    url = reverse("chat:branch_rename", args=[session.pk, talked.pk])
    response = as_alice.post(url, {"name": "  plan A  "}, **HX)
    assert response.status_code == 200
    body = html.unescape(response.content.decode())
    assert 'data-testid="branch-label">plan A<' in body
    assert re.search(r'data-testid="current-branch"[^>]*>plan A ·', body)
    talked.refresh_from_db()
    assert talked.name == "plan A"
    assert 'value="plan A"' in _page(as_alice, session)  # the form shows the name to edit


@pytest.mark.parametrize(
    ("typed", "says"),
    [("   ", "cannot be empty"), ("y" * 201, "201 characters long; the limit is 200")],
)
def test_a_bad_name_comes_back_in_the_form_with_what_was_typed(
    as_alice, session, talked, typed, says
):
    url = reverse("chat:branch_rename", args=[session.pk, talked.pk])
    response = as_alice.post(url, {"name": typed}, **HX)
    assert response.status_code == 400
    assert response["HX-Retarget"] == f"#rename-branch-{talked.pk}"
    assert response["HX-Reswap"] == "outerHTML"
    body = html.unescape(response.content.decode())
    assert 'data-testid="branch-rename-error"' in body
    assert says in body
    assert f'value="{typed}"' in body  # nothing typed is lost
    talked.refresh_from_db()
    assert talked.name == ""


def test_a_branch_of_another_session_is_not_renamed_through_this_one(
    as_alice, alice, session, talked
):
    from sessions_app.services import session_create

    other = session_create(owner=alice, name="other")
    url = reverse("chat:branch_rename", args=[other.pk, talked.pk])
    assert as_alice.post(url, {"name": "x"}, **HX).status_code == 404
    talked.refresh_from_db()
    assert talked.name == ""


def test_an_edited_message_shows_a_switcher_that_leads_to_the_original(as_alice, session, talked):
    edit = branch_fork(branch=talked, position=2, metadata={"edited_message": 3})
    say(edit, "two, edited", "reply to the edit")
    page = _page(as_alice, session)
    assert page.count('data-testid="versions"') == 1
    switcher = page[page.index('data-testid="versions"') :]
    switcher = switcher[: switcher.index("</button>", switcher.index("version-next"))]
    assert ">2/2<" in switcher
    back = reverse("chat:activate", args=[session.pk, talked.pk])
    assert f'hx-post="{back}"' in switcher
    assert re.search(r'data-testid="version-next"[^>]*disabled', switcher)
    # It sits on the edited message.
    edited_at = page.index("two, edited")
    message_starts = page.rfind("data-role=", 0, edited_at)
    assert page.rfind('data-testid="versions"', 0, edited_at) > message_starts

    branch_activate(branch=talked)
    page = _page(as_alice, session)
    assert ">1/2<" in page
    assert f'hx-post="{reverse("chat:activate", args=[session.pk, edit.pk])}"' in page


def test_the_session_page_queries_do_not_grow_with_branches_and_versions(as_alice, session, talked):
    def queries() -> int:
        from django.db import connection
        from django.test.utils import CaptureQueriesContext

        with CaptureQueriesContext(connection) as seen:
            as_alice.get(reverse("chat:session", args=[session.pk]))
        return len(seen)

    branch_fork(branch=talked, position=2, metadata={"edited_message": 3})
    branch_activate(branch=talked)
    queries()  # the first page of a process reads the access rules, cached after (access.cache)
    few = queries()
    for i in range(20):
        fork = branch_fork(branch=talked, position=i % 4, metadata={"edited_message": i})
        say(fork, f"edit {i}")
    branch_activate(branch=talked)
    assert queries() == few


def test_the_rewind_dialog_names_the_branch_it_cuts_and_what_goes(as_alice, session, talked):
    mark = checkpoint_create(branch=talked, name="early")
    say(talked, "three", "reply three")
    checkpoint_create(branch=talked, name="late")
    branch_fork(branch=talked, position=5, make_current=False)
    response = as_alice.get(reverse("chat:checkpoint_restore", args=[mark.pk]), **HX)
    warning = re.search(r'data-testid="rewind-warning">(.*?)</span>', response.content.decode())
    assert warning is not None
    assert _text(warning.group(1)) == (
        "Cuts the branch “main” back to this checkpoint: permanently deletes 2 later messages, "
        "1 later checkpoint and 1 branch forked from them."
    )
    Branch.objects.filter(pk=talked.pk).update(name="the long road")
    response = as_alice.get(reverse("chat:checkpoint_restore", args=[mark.pk]), **HX)
    assert "Cuts the branch “the long road” back" in html.unescape(response.content.decode())


def test_checkpoint_details_name_the_branch_by_its_label(as_alice, session, talked):
    mark = checkpoint_create(branch=talked, name="start")
    fork = branch_fork(branch=talked, position=4, forked_from_id=mark.pk)
    say(fork, "more")
    later = checkpoint_create(branch=fork, name="later")
    body = html.unescape(
        as_alice.get(reverse("chat:checkpoint_detail", args=[later.pk])).content.decode()
    )
    assert "on “from “start””" in body
    assert f"branch {fork.pk}" not in body


def test_the_agents_checkpoint_info_names_the_branch_by_its_label(session, talked):
    from agents.rollback_agent import RollbackAgent

    Branch.objects.filter(pk=talked.pk).update(name="research")
    mark = checkpoint_create(branch=talked, name="start")
    agent = RollbackAgent(external_session_id=session.pk, model=None, skip_session_creation=True)
    info = agent.get_checkpoint_info_tool(mark.pk)
    assert "• Branch: research" in info


def test_after_the_agents_rollback_the_page_says_where_it_moved(
    as_alice, session, talked, fake_llm
):
    from agents.worker import run_turn

    mark = checkpoint_create(branch=talked, name="start")
    fake_llm.queue(
        ToolCalls([ToolCall("rollback_to_checkpoint_tool", {"checkpoint_id_or_name": "start"})]),
        Reply("Rolled back."),
    )
    turn = turn_start(session=session, message="roll back to the start")
    run_turn(turn.pk)
    moved = current_branch(session)
    assert moved.forked_from_id == mark.pk
    said = (
        "The agent rolled back to checkpoint “start”: you are now on a new branch, from “start”. "
        "The branch you were on is kept in the tree."
    )
    notice = re.compile(r'data-testid="rollback-notice"[^>]*>(.*?)</div>')
    found = notice.search(_page(as_alice, session))
    assert found is not None
    assert _text(found.group(1)) == said
    # When the turn ends, the socket has the page fetch its refresh, which carries the notice too.
    frame = render_event(session, {"type": "turn.finished", "turn": turn.pk, "session": session.pk})
    refresh = reverse("chat:refresh", args=[session.pk])
    assert f'hx-get="{refresh}"' in frame
    found = notice.search(as_alice.get(refresh).content.decode())
    assert found is not None
    assert _text(found.group(1)) == said
    # Once the user moves elsewhere, the notice goes.
    branch_activate(branch=talked)
    assert pages.conversation(session)["rollback_notice"] is None
    assert 'data-testid="rollback-notice"' not in _page(as_alice, session)


def test_the_agents_rollback_says_what_it_could_not_undo(as_alice, session, talked, fake_llm):
    from agents.worker import run_turn

    checkpoint_create(branch=talked, name="start")
    # After the checkpoint the agent saves a memory: a restore cannot undo that (external).
    fake_llm.queue(
        ToolCalls(
            [ToolCall("remember", {"key": "editor", "category": "Skill", "l0": "Uses Helix"})]
        ),
        Reply("Noted."),
    )
    run_turn(turn_start(session=session, message="remember my editor").pk)
    fake_llm.queue(
        ToolCalls([ToolCall("rollback_to_checkpoint_tool", {"checkpoint_id_or_name": "start"})]),
        Reply("Rolled back."),
    )
    run_turn(turn_start(session=session, message="roll back to the start").pk)

    page = _page(as_alice, session)
    notice = re.search(r'data-testid="rollback-notice"[^>]*>(.*?)</div>', page, re.S)
    assert notice is not None
    assert "could not undo" in notice.group(1)
    assert re.findall(r'data-testid="left-behind"><code>(\w+)</code>', notice.group(1)) == [
        "remember"
    ]


# Versions of edits and regenerations, made through the page as a person makes them: an edit's
# versions are counted on the user message, a regeneration's on the reply, at any nesting.


def _messages_shown(page: str) -> list[dict[str, str]]:
    """The messages with text on a chat page, oldest first: id, text, and their switcher's
    label ("" without one) and the URLs its Previous and Next buttons post (when enabled)."""
    found = []
    for part in page.split('<div class="message" data-role="')[1:]:
        body = re.search(r'data-testid="user-text">(.*?)</div>', part, re.S) or re.search(
            r'<div class="body">(.*?)</div>', part, re.S
        )
        if body is None:
            continue  # a tool call
        switcher = re.search(r'data-testid="versions".*?data-testid="copy-message"', part, re.S)
        both = switcher.group(0) if switcher else ""
        label = re.search(r'data-testid="version-index">([^<]*)<', both)
        message = {
            "id": re.search(r'id="msg-(\d+)"', part).group(1),  # type: ignore[union-attr]
            "text": _text(body.group(1)),
            "label": label.group(1) if label else "",
        }
        for which in ("previous", "next"):
            button = re.search(rf'version-{which}"[^>]*hx-post="([^"]+)"', both)
            if button:
                message[which] = button.group(1)
        found.append(message)
    return found


class _Chat:
    """The chat page as its buttons drive it: each action posts what its button posts, the turn
    it starts run inline and answered by the model server with `reply`."""

    def __init__(self, client, session, llm, on_commit) -> None:
        self.client, self.session, self.llm, self.on_commit = client, session, llm, on_commit

    def send(self, text: str, reply: str) -> None:
        self._post(reverse("chat:send", args=[self.session.pk]), reply, message=text)

    def edit(self, old: str, new: str, reply: str) -> None:
        url = reverse("chat:edit", args=[self.session.pk, self._message(old)["id"]])
        self._post(url, reply, message=new)

    def regenerate(self, old: str, reply: str) -> None:
        url = reverse("chat:regenerate", args=[self.session.pk, self._message(old)["id"]])
        self._post(url, reply)

    def switch(self, text: str, which: str) -> None:
        """Press `which` ("previous" or "next") on the switcher of the message `text`."""
        self._post(self._message(text)[which])

    def shown(self) -> list[tuple[str, str]]:
        """(text, its switcher's "n/m" or "") of each message shown, oldest first."""
        return [(m["text"], m["label"]) for m in _messages_shown(_page(self.client, self.session))]

    def _message(self, text: str) -> dict[str, str]:
        (found,) = [
            m for m in _messages_shown(_page(self.client, self.session)) if m["text"] == text
        ]
        return found

    def _post(self, url: str, reply: str | None = None, **data: str) -> None:
        if reply is not None:
            self.llm.queue(Reply(reply))
        with self.on_commit(execute=True):
            assert self.client.post(url, data, **HX).status_code == 200


@pytest.fixture
def chat(as_alice, session, fake_llm, inline_turns, django_capture_on_commit_callbacks):
    return _Chat(as_alice, session, fake_llm, django_capture_on_commit_callbacks)


@pytest.fixture
def asked(chat):
    chat.send("question", "answer")
    return chat


def test_an_edit_then_a_regeneration_counts_the_edit_on_the_question_and_the_new_reply_on_the_reply(
    asked,
):
    asked.edit("question", "better question", "answer to better")
    asked.regenerate("answer to better", "another answer to better")
    assert asked.shown() == [("better question", "2/2"), ("another answer to better", "2/2")]

    asked.switch("another answer to better", "previous")
    assert asked.shown() == [("better question", "2/2"), ("answer to better", "1/2")]
    asked.switch("better question", "previous")
    assert asked.shown() == [("question", "1/2"), ("answer", "")]
    asked.switch("question", "next")  # back to the edit, as its newest branch shows it
    assert asked.shown() == [("better question", "2/2"), ("another answer to better", "2/2")]


def test_a_regeneration_then_an_edit_counts_each_where_it_was_made(asked):
    asked.regenerate("answer", "second answer")
    assert asked.shown() == [("question", ""), ("second answer", "2/2")]
    asked.edit("question", "edited question", "answer to the edit")
    assert asked.shown() == [("edited question", "2/2"), ("answer to the edit", "")]

    asked.switch("edited question", "previous")
    assert asked.shown() == [("question", "1/2"), ("second answer", "2/2")]
    asked.switch("second answer", "previous")
    assert asked.shown() == [("question", "1/2"), ("answer", "1/2")]
    asked.switch("question", "next")
    assert asked.shown() == [("edited question", "2/2"), ("answer to the edit", "")]


def test_edits_and_regenerations_nested_deeper_keep_their_versions_apart(asked):
    asked.edit("question", "edit one", "e1")
    asked.regenerate("e1", "e2")
    asked.regenerate("e2", "e3")
    assert asked.shown() == [("edit one", "2/2"), ("e3", "3/3")]
    asked.switch("e3", "previous")
    assert asked.shown() == [("edit one", "2/2"), ("e2", "2/3")]
    asked.edit("edit one", "edit two", "f1")  # made from the second reply to the first edit
    asked.regenerate("f1", "f2")
    assert asked.shown() == [("edit two", "3/3"), ("f2", "2/2")]
    # A later exchange, edited and regenerated in its turn.
    asked.send("follow-up", "g1")
    asked.edit("follow-up", "follow-up, edited", "h1")
    asked.regenerate("h1", "h2")
    assert asked.shown() == [
        ("edit two", "3/3"),
        ("f2", "2/2"),
        ("follow-up, edited", "2/2"),
        ("h2", "2/2"),
    ]

    asked.switch("h2", "previous")
    assert asked.shown()[2:] == [("follow-up, edited", "2/2"), ("h1", "1/2")]
    asked.switch("follow-up, edited", "previous")
    assert asked.shown()[2:] == [("follow-up", "1/2"), ("g1", "")]
    asked.switch("f2", "previous")  # the follow-up is not part of this version
    assert asked.shown() == [("edit two", "3/3"), ("f1", "1/2")]
    asked.switch("edit two", "previous")  # the first edit as its newest branch shows it
    assert asked.shown() == [("edit one", "2/3"), ("e3", "3/3")]
    asked.switch("e3", "previous")
    asked.switch("e2", "previous")
    assert asked.shown() == [("edit one", "2/3"), ("e1", "1/3")]
    asked.switch("edit one", "previous")
    assert asked.shown() == [("question", "1/3"), ("answer", "")]
    asked.switch("question", "next")
    assert asked.shown() == [("edit one", "2/3"), ("e3", "3/3")]
    asked.switch("edit one", "next")  # the newest branch showing the second edit
    assert asked.shown() == [
        ("edit two", "3/3"),
        ("f2", "2/2"),
        ("follow-up, edited", "2/2"),
        ("h2", "2/2"),
    ]
