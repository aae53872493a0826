"""The chat pages through HTTP (with the HX-Request header where htmx sends it)."""

from __future__ import annotations

import json
import re

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse

from checkpoints.models import Checkpoint
from checkpoints.services import checkpoint_create, checkpoint_delete
from checkpoints.transfer import session_export, session_import
from sessions_app.models import Branch, Message, Session, Turn
from sessions_app.selectors import branch_history, current_branch
from sessions_app.services import message_append, session_create, session_update
from tests.conftest import grow, say
from tests.fakes.chat_server import Error, Reply

pytestmark = pytest.mark.django_db
HX = {"HTTP_HX_REQUEST": "true"}


@pytest.fixture
def as_alice(client, alice):
    client.force_login(alice)
    return client


@pytest.fixture
def as_bob(client, bob):
    client.force_login(bob)
    return client


def _routes(session, branch, message, checkpoint, turn):
    s = session.pk
    return [
        ("get", reverse("chat:session", args=[s])),
        ("post", reverse("chat:send", args=[s])),
        ("post", reverse("chat:rename", args=[s])),
        ("post", reverse("chat:delete", args=[s])),
        ("get", reverse("chat:export", args=[s])),
        ("get", reverse("chat:earlier", args=[s])),
        ("get", reverse("chat:refresh", args=[s])),
        ("post", reverse("chat:retry", args=[s, turn.pk])),
        ("get", reverse("chat:edit_form", args=[s, message.pk])),
        ("post", reverse("chat:edit", args=[s, message.pk])),
        ("post", reverse("chat:regenerate", args=[s, message.pk])),
        ("post", reverse("chat:activate", args=[s, branch.pk])),
        ("post", reverse("chat:checkpoint_save", args=[s])),
        ("get", reverse("chat:checkpoint_detail", args=[checkpoint.pk])),
        ("post", reverse("chat:checkpoint_delete", args=[checkpoint.pk])),
        ("get", reverse("chat:checkpoint_restore", args=[checkpoint.pk])),
        ("post", reverse("chat:checkpoint_restore", args=[checkpoint.pk])),
    ]


@pytest.fixture
def alices_things(session, branch):
    say(branch, "hello", "hi")
    checkpoint = checkpoint_create(branch=branch, name="cp")
    turn = Turn.objects.create(
        session=session,
        branch=branch,
        user_message=Message.objects.filter(branch=branch).first(),
        status="failed",
        error="boom",
    )
    message = Message.objects.get(branch=branch, position=0)
    return session, branch, message, checkpoint, turn


def test_every_chat_route_is_a_404_for_another_user(as_bob, alices_things):
    for method, url in _routes(*alices_things):
        for headers in ({}, HX):
            response = getattr(as_bob, method)(url, **headers)
            assert response.status_code == 404, (method, url, response.status_code)
    session, _branch, *_ = alices_things
    assert Session.objects.filter(pk=session.pk).exists()
    assert Checkpoint.objects.count() == 1
    assert Branch.objects.count() == 1


def test_every_chat_route_asks_an_anonymous_visitor_to_log_in(client, alices_things):
    for method, url in _routes(*alices_things):
        response = getattr(client, method)(url)
        assert response.status_code == 302
        assert "/accounts/login/" in response["Location"]


def test_home_opens_the_latest_session_or_offers_a_new_one(as_alice, alice):
    response = as_alice.get(reverse("chat:home"))
    assert response.status_code == 200
    assert b'data-testid="new-session"' in response.content
    s = session_create(owner=alice, name="Trip")
    assert as_alice.get(reverse("chat:home"))["Location"] == reverse("chat:session", args=[s.pk])


def test_new_session_is_created_and_opened(as_alice, alice):
    response = as_alice.post(reverse("chat:new"))
    session = Session.objects.get(owner=alice)
    assert response["Location"] == reverse("chat:session", args=[session.pk])
    page = as_alice.get(response["Location"])
    assert b'data-testid="message-input"' in page.content
    assert b"ws/chat/" in page.content


def test_the_page_renders_markdown_and_keeps_html_inert(as_alice, session, branch):
    message_append(branch=branch, role="user", content="<script>alert(1)</script> **hi**")
    message_append(
        branch=branch,
        role="assistant",
        content="**yo** [x](javascript:alert(1)) "
        '<img src=x onerror="alert(1)">\n\n```py\nprint(1)\n```',
    )
    page = as_alice.get(reverse("chat:session", args=[session.pk])).content.decode()
    assert "<script>alert(1)</script>" not in page
    # The user's text as typed (escaped, no Markdown); the model's as sanitised Markdown.
    assert "&lt;script&gt;alert(1)&lt;/script&gt; **hi**" in page
    assert "<strong>hi</strong>" not in page
    assert "<strong>yo</strong>" in page
    assert "javascript:alert" not in page.replace("[x](javascript:alert(1))", "")
    assert "<img" not in page
    assert "<pre><code" in page


def test_sending_runs_a_turn_and_shows_the_busy_composer(as_alice, session, inline_turns):
    with_captured = as_alice.post(reverse("chat:send", args=[session.pk]), {"message": "hi"}, **HX)
    assert with_captured.status_code == 200
    assert b'id="composer"' in with_captured.content
    assert Turn.objects.get(session=session).message == "hi"


def test_a_turn_sent_from_the_page_is_answered(
    as_alice, session, fake_llm, inline_turns, django_capture_on_commit_callbacks
):
    fake_llm.queue(Reply("Hello from the model"))
    with django_capture_on_commit_callbacks(execute=True):
        as_alice.post(reverse("chat:send", args=[session.pk]), {"message": "hi"}, **HX)
    assert [m.content for m in branch_history(current_branch(session))] == [
        "hi",
        "Hello from the model",
    ]
    page = as_alice.get(reverse("chat:session", args=[session.pk])).content.decode()
    assert "Hello from the model" in page
    assert "fake-model" in page


@pytest.mark.parametrize(
    ("text", "status", "says"),
    [("", 400, "empty"), ("   ", 400, "empty"), ("x" * 40, 413, "limit is 30")],
)
def test_bad_messages_get_a_notice_and_nothing_is_stored(
    as_alice, session, settings, text, status, says
):
    settings.AGENT_MAX_INPUT_CHARS = 30
    response = as_alice.post(reverse("chat:send", args=[session.pk]), {"message": text}, **HX)
    assert response.status_code == status
    assert response["HX-Retarget"] == "#notices"
    assert says in response.content.decode()
    assert not Message.objects.exists()
    assert not Turn.objects.exists()


def test_the_composer_carries_the_length_limit_without_cutting_a_paste(
    as_alice, session, branch, settings, inline_turns
):
    """composer.js counts against data-max-chars; no maxlength would silently cut a long paste."""
    settings.AGENT_MAX_INPUT_CHARS = 1234
    user_message = message_append(branch=branch, role="user", content="hello")
    page = as_alice.get(reverse("chat:session", args=[session.pk])).content.decode()
    after_send = as_alice.post(
        reverse("chat:send", args=[session.pk]), {"message": "hi"}, **HX
    ).content.decode()
    edit = as_alice.get(
        reverse("chat:edit_form", args=[session.pk, user_message.pk]), **HX
    ).content.decode()
    for html in (page, after_send, edit):
        textarea = re.search(r"<textarea[^>]*>", html)
        assert textarea
        assert 'data-max-chars="1234"' in textarea.group()
        assert "maxlength" not in textarea.group()
    assert 'data-testid="char-limit"' in page
    assert 'aria-describedby="composer-limit"' in page


def test_every_message_has_a_copy_button_with_its_text(as_alice, session, branch):
    message_append(branch=branch, role="user", content='say "hi"\n<b>now</b>')
    message_append(branch=branch, role="assistant", content="**hi**")
    page = as_alice.get(reverse("chat:session", args=[session.pk])).content.decode()
    assert 'data-copy="say &quot;hi&quot;\n&lt;b&gt;now&lt;/b&gt;"' in page
    assert 'data-copy="**hi**"' in page
    assert page.count('data-testid="copy-message"') == 2


def test_a_second_message_while_the_agent_answers_is_refused(as_alice, session):
    as_alice.post(reverse("chat:send", args=[session.pk]), {"message": "one"}, **HX)
    response = as_alice.post(reverse("chat:send", args=[session.pk]), {"message": "two"}, **HX)
    assert response.status_code == 409
    assert "still answering" in response.content.decode()
    assert Message.objects.count() == 1


def test_a_failed_turn_shows_its_error_and_retry_answers_it(
    as_alice, session, fake_llm, inline_turns, settings, django_capture_on_commit_callbacks
):
    settings.AGENT_MAX_RETRIES = 0
    fake_llm.queue(Error(500), Reply("second try worked"))
    with django_capture_on_commit_callbacks(execute=True):
        as_alice.post(reverse("chat:send", args=[session.pk]), {"message": "hi"}, **HX)
    page = as_alice.get(reverse("chat:session", args=[session.pk])).content.decode()
    assert 'data-testid="turn-error"' in page
    assert "HTTP 500" in page
    failed = Turn.objects.get(status="failed")
    with django_capture_on_commit_callbacks(execute=True):
        response = as_alice.post(reverse("chat:retry", args=[session.pk, failed.pk]), **HX)
    assert response.status_code == 200
    contents = [m.content for m in branch_history(current_branch(session))]
    assert contents == ["hi", "second try worked"]  # the message was not stored twice
    page = as_alice.get(reverse("chat:session", args=[session.pk])).content.decode()
    assert 'data-testid="turn-error"' not in page


def test_rename_and_a_too_long_name(as_alice, session):
    url = reverse("chat:rename", args=[session.pk])
    response = as_alice.post(url, {"name": "Renamed"}, **HX)
    assert response.status_code == 200
    assert "Renamed" in response.content.decode()
    response = as_alice.post(url, {"name": "n" * 201}, **HX)
    assert response.status_code == 400
    assert "limit is 200" in response.content.decode()
    session.refresh_from_db()
    assert session.session_name == "Renamed"


def test_rename_in_the_sidebar_updates_the_open_page_header(as_alice, alice, session):
    url = reverse("chat:rename", args=[session.pk]) + f"?current={session.pk}"
    response = as_alice.post(url, {"name": "From the sidebar"}, **HX)
    body = response.content.decode()
    assert response.status_code == 200
    assert "From the sidebar" in body
    assert 'id="conv-header" hx-swap-oob="morph"' in body
    assert 'data-testid="current-branch"' in body
    session.refresh_from_db()
    assert session.session_name == "From the sidebar"


def test_renaming_another_session_leaves_the_open_pages_header_alone(as_alice, alice, session):
    other = session_create(owner=alice, name="Other")
    url = reverse("chat:rename", args=[other.pk]) + f"?current={session.pk}"
    body = as_alice.post(url, {"name": "Other renamed"}, **HX).content.decode()
    assert "Other renamed" in body
    assert "conv-header" not in body


def test_search_filters_the_sidebar(as_alice, alice):
    session_create(owner=alice, name="Python basics")
    session_create(owner=alice, name="Trip to Rome")
    body = as_alice.get(reverse("chat:session_list"), {"q": "rome"}, **HX).content.decode()
    assert "Trip to Rome" in body
    assert "Python basics" not in body


def test_a_search_with_a_nul_character_says_why_under_the_search_box(as_alice, session):
    response = as_alice.get(reverse("chat:session_list"), {"q": "py\x00"}, **HX)
    assert response.status_code == 200  # the list, in place, says what is wrong
    body = response.content.decode()
    assert 'data-testid="search-error">The search cannot contain NUL characters.' in body
    assert "Python basics" not in body


def test_a_new_session_beyond_the_per_user_limit_is_refused_with_a_message(
    as_alice, session, settings
):
    settings.ROLLBACK_MAX_SESSIONS_PER_USER = 1
    response = as_alice.post(reverse("chat:new"), {"name": "one more"}, follow=True)
    assert "the most one account may keep is 1" in response.content.decode()
    assert Session.objects.count() == 1


def test_delete_session_redirects_home(as_alice, session):
    response = as_alice.post(reverse("chat:delete", args=[session.pk]), **HX)
    assert response.status_code == 204
    assert response["HX-Redirect"] == "/chat/"
    assert not Session.objects.exists()


def test_long_conversations_show_the_last_page_and_load_earlier(as_alice, session, branch):
    grow(branch, 250)
    page = as_alice.get(reverse("chat:session", args=[session.pk])).content.decode()
    assert page.count('data-testid="message"') == 100
    assert "message 249" in page
    assert "message 149" not in page
    earlier = as_alice.get(reverse("chat:earlier", args=[session.pk]), {"before": 150}, **HX)
    body = earlier.content.decode()
    assert body.count('data-testid="message"') == 100
    assert "message 50<" in body
    assert "before=50" in body


def test_activating_a_branch_shows_its_history(as_alice, session, branch):
    say(branch, "a", "b")
    cp = checkpoint_create(branch=branch, name="two")
    say(branch, "c", "d")
    from checkpoints.services import checkpoint_restore

    new = checkpoint_restore(checkpoint=cp).branch
    response = as_alice.post(reverse("chat:activate", args=[session.pk, branch.pk]), **HX)
    assert response.status_code == 200
    assert ">d</p>" in response.content.decode()
    assert current_branch(session).pk == branch.pk
    response = as_alice.post(reverse("chat:activate", args=[session.pk, new.pk]), **HX)
    assert ">d</p>" not in response.content.decode()


def test_activating_a_branch_of_another_session_is_a_404(as_alice, alice, session):
    other = session_create(owner=alice, name="other")
    theirs = current_branch(other)
    response = as_alice.post(reverse("chat:activate", args=[session.pk, theirs.pk]), **HX)
    assert response.status_code == 404


def test_edit_a_past_message_starts_a_new_branch(
    as_alice, session, branch, inline_turns, django_capture_on_commit_callbacks
):
    say(branch, "first question", "first answer", "second question", "second answer")
    first = Message.objects.get(branch=branch, position=0)
    form = as_alice.get(reverse("chat:edit_form", args=[session.pk, first.pk]), **HX)
    assert "first question" in form.content.decode()
    with django_capture_on_commit_callbacks(execute=True):
        response = as_alice.post(
            reverse("chat:edit", args=[session.pk, first.pk]), {"message": "better question"}, **HX
        )
    assert response.status_code == 200
    new = current_branch(session)
    assert new.pk != branch.pk
    assert new.parent_id == branch.pk
    assert new.fork_position == 0
    history = [m.content for m in branch_history(new)]
    assert history[0] == "better question"
    assert "second question" not in history
    branch.refresh_from_db()
    assert branch.message_count == 4  # the old branch is kept


def test_regenerate_answers_the_same_question_on_a_new_branch(
    as_alice, session, branch, fake_llm, inline_turns, django_capture_on_commit_callbacks
):
    say(branch, "question", "old answer")
    reply = Message.objects.get(branch=branch, position=1)
    fake_llm.queue(Reply("new answer"))
    with django_capture_on_commit_callbacks(execute=True):
        as_alice.post(reverse("chat:regenerate", args=[session.pk, reply.pk]), **HX)
    new = current_branch(session)
    assert [m.content for m in branch_history(new)] == ["question", "new answer"]
    assert [m.content for m in branch_history(branch)] == ["question", "old answer"]


def test_export_downloads_the_document_and_import_makes_a_copy(as_alice, alice, session, branch):
    say(branch, "a", "b")
    response = as_alice.get(reverse("chat:export", args=[session.pk]))
    assert response["Content-Type"] == "application/json"
    assert "attachment" in response["Content-Disposition"]
    document = json.loads(response.content)
    assert document["format"] == "rollback.session"
    upload = SimpleUploadedFile("s.json", response.content, content_type="application/json")
    response = as_alice.post(reverse("chat:import"), {"document": upload})
    copy = Session.objects.exclude(pk=session.pk).get(owner=alice)
    assert response["Location"] == reverse("chat:session", args=[copy.pk])
    assert [m.content for m in branch_history(current_branch(copy))] == ["a", "b"]


def test_the_header_says_which_export_is_json_and_which_markdown(as_alice, session):
    page = as_alice.get(reverse("chat:session", args=[session.pk])).content.decode()
    assert re.search(r'data-testid="export">Export JSON</a>', page)
    assert re.search(r'data-testid="export-markdown">Export Markdown</a>', page)


def test_a_copy_imported_beside_its_original_is_named_apart_and_not_pinned(
    as_alice, alice, bob, session, branch
):
    session_update(session=session, pinned=True)
    say(branch, "a", "b")
    document = as_alice.get(reverse("chat:export", args=[session.pk])).content
    upload = SimpleUploadedFile("s.json", document, content_type="application/json")
    as_alice.post(reverse("chat:import"), {"document": upload})

    copy = Session.objects.exclude(pk=session.pk).get(owner=alice)
    assert copy.session_name == f"{session.session_name} (imported)"
    assert copy.pinned_at is None
    # Moved to an account without it, the conversation keeps its name and its pin.
    moved = session_import(owner=bob, raw=document)
    assert (moved.session_name, moved.pinned_at is not None) == (session.session_name, True)


def test_importing_garbage_says_why_and_creates_nothing(as_alice, session):
    upload = SimpleUploadedFile("s.json", b"{not json", content_type="application/json")
    response = as_alice.post(reverse("chat:import"), {"document": upload}, follow=True)
    assert "Import failed" in response.content.decode()
    assert Session.objects.count() == 1


def test_import_of_another_version_is_refused(as_alice, session):
    doc = session_export(session=session)
    doc["version"] = 7
    upload = SimpleUploadedFile("s.json", json.dumps(doc).encode())
    response = as_alice.post(reverse("chat:import"), {"document": upload}, follow=True)
    assert "Unsupported export version 7" in response.content.decode()
    assert Session.objects.count() == 1


def test_import_of_a_time_python_cannot_hold_is_refused_and_pages_keep_working(
    as_alice, alice, session, branch
):
    say(branch, "a", "b")
    doc = session_export(session=session)
    doc["session"]["created_at"] = "9999-12-31T23:59:59-05:00"
    doc["branches"][0]["messages"][1]["created_at"] = "9999-12-31T23:59:59-05:00"
    upload = SimpleUploadedFile("s.json", json.dumps(doc).encode())
    response = as_alice.post(reverse("chat:import"), {"document": upload}, follow=True)
    assert "Import failed: Cannot import this document: The session&#x27;s created_at" in (
        response.content.decode()
    )
    assert Session.objects.count() == 1
    assert Message.objects.count() == 2
    assert as_alice.get(reverse("chat:session", args=[session.pk])).status_code == 200


def test_import_beyond_the_per_user_limit_is_refused_with_a_message(as_alice, session, settings):
    settings.ROLLBACK_MAX_SESSIONS_PER_USER = 1
    upload = SimpleUploadedFile("s.json", json.dumps(session_export(session=session)).encode())
    response = as_alice.post(reverse("chat:import"), {"document": upload}, follow=True)
    assert "Import failed: You have 1 session;" in response.content.decode()
    assert Session.objects.count() == 1


def test_import_of_a_session_choosing_a_model_not_allowed_is_refused(as_alice, session, settings):
    settings.AGENT_MODEL, settings.AGENT_ALLOWED_MODELS = "house-model", []
    doc = session_export(session=session)
    doc["session"]["metadata"] = {"settings": {"model": "o1-pro"}}
    upload = SimpleUploadedFile("s.json", json.dumps(doc).encode())
    response = as_alice.post(reverse("chat:import"), {"document": upload}, follow=True)
    assert "Import failed" in response.content.decode()
    assert "is not allowed here" in response.content.decode()
    assert Session.objects.count() == 1


# --- the checkpoint panel ----------------------------------------------------------------


def test_save_a_checkpoint_from_the_panel(as_alice, session, branch):
    say(branch, "a", "b")
    response = as_alice.post(
        reverse("chat:checkpoint_save", args=[session.pk]),
        {"name": "after-intro", "description": "we said hi"},
        **HX,
    )
    body = response.content.decode()
    assert response.status_code == 200
    assert "Saved “after-intro”." in body
    # The answer is the page's refresh: the list (with the page's filter), the tree, the count
    # and the new checkpoint's marker come with it, nothing is left to fetch.
    assert 'id="checkpoint-reload"' not in body
    assert 'id="checkpoint-total"' in body
    assert body.count("after-intro") >= 2  # in the list, and as the conversation's marker
    assert 'data-testid="checkpoint-marker"' in body
    cp = Checkpoint.objects.get()
    assert (cp.message_count, cp.description, cp.is_auto) == (2, "we said hi", False)


def test_a_checkpoint_name_over_200_characters_gets_a_notice(as_alice, session):
    response = as_alice.post(
        reverse("chat:checkpoint_save", args=[session.pk]), {"name": "n" * 201}, **HX
    )
    assert response.status_code == 400
    assert "limit is 200" in response.content.decode()
    assert not Checkpoint.objects.exists()


def test_the_restore_dialog_says_what_a_rewind_would_discard(as_alice, session, branch):
    say(branch, "a", "b")
    cp = checkpoint_create(branch=branch, name="early")
    say(branch, "c", "d", "e")
    checkpoint_create(branch=branch, name="late")
    body = as_alice.get(reverse("chat:checkpoint_restore", args=[cp.pk]), **HX).content.decode()
    assert 'value="branch" checked data-testid="restore-mode"' in body  # the default
    assert 'value="rewind" checked' not in body
    assert "3 later messages, 1 later checkpoint" in body


def test_restore_as_branch_and_rewind_from_the_panel(as_alice, session, branch):
    say(branch, "a", "b")
    cp = checkpoint_create(branch=branch, name="early")
    say(branch, "c", "d")
    url = reverse("chat:checkpoint_restore", args=[cp.pk])
    response = as_alice.post(url, {"mode": "branch"}, **HX)
    assert response.status_code == 200
    assert Branch.objects.filter(session=session).count() == 2
    assert ">c</p>" not in response.content.decode()
    as_alice.post(reverse("chat:activate", args=[session.pk, branch.pk]), **HX)
    response = as_alice.post(url, {"mode": "rewind"}, **HX)
    assert response.status_code == 200
    branch.refresh_from_db()
    assert branch.message_count == 2


def test_an_unknown_restore_mode_is_refused(as_alice, session, branch):
    cp = checkpoint_create(branch=branch, name="cp")
    response = as_alice.post(
        reverse("chat:checkpoint_restore", args=[cp.pk]), {"mode": "sideways"}, **HX
    )
    assert response.status_code == 400
    assert "restore mode" in response.content.decode()
    assert Branch.objects.count() == 1


def test_restoring_a_checkpoint_deleted_in_another_tab_says_so(as_alice, session, branch):
    cp = checkpoint_create(branch=branch, name="gone")
    checkpoint_delete(checkpoint=cp)
    response = as_alice.post(reverse("chat:checkpoint_restore", args=[cp.pk]), **HX)
    assert response.status_code == 404
    assert response["HX-Retarget"] == "#notices"
    assert "not found" in response.content.decode()


def test_delete_a_checkpoint_from_the_panel(as_alice, session, branch):
    cp = checkpoint_create(branch=branch, name="doomed")
    response = as_alice.post(reverse("chat:checkpoint_delete", args=[cp.pk]), **HX)
    assert response.status_code == 200
    assert "doomed" not in response.content.decode()
    assert not Checkpoint.objects.exists()


def test_the_page_shows_the_context_gauge_and_where_the_summary_begins(as_alice, session, settings):
    from sessions_app.services import summary_store

    settings.AGENT_CONTEXT_TOKENS = 20_000
    settings.AGENT_MAX_OUTPUT_TOKENS = 1_000
    branch = current_branch(session)
    grow(branch, 60, 350)
    page = as_alice.get(reverse("chat:session", args=[session.pk])).content.decode()
    # About 60 x 350 characters and the instructions and tool schemas (SYSTEM_CHARS), at 3.5
    # characters a token, of 18,000.
    shown = re.search(r'data-testid="context-gauge".*?context (\d+)%', page, re.S)
    assert shown is not None
    assert 43 <= int(shown.group(1)) <= 50
    assert 'data-testid="context-summary"' not in page

    summary_store(branch=branch, end=40, content="Alice asked about **loops**.", model="m")
    page = as_alice.get(reverse("chat:session", args=[session.pk])).content.decode()
    assert "The first 40 messages reach the model as a summary." in page
    assert 'data-testid="context-summary"' in page
    assert "<strong>loops</strong>" in page  # rendered as sanitised Markdown
    # The divider sits right before the first message the model sees whole.
    divider = page.index('data-testid="context-summary"')
    assert page.index("message 39:") < divider < page.index("message 40:")
    grow(branch, 200, 350)
    page = as_alice.get(reverse("chat:session", args=[session.pk])).content.decode()
    assert "context full" in page


def _reply(branch, content: str, finish_reason: str) -> Message:
    return message_append(
        branch=branch, role="assistant", content=content, metadata={"finish_reason": finish_reason}
    )


@pytest.mark.parametrize("finish_reason", ["length", "interrupted"])
def test_a_cut_off_last_reply_is_badged_and_can_be_continued(
    as_alice, session, branch, finish_reason
):
    say(branch, "question")
    _reply(branch, "the first half", finish_reason)
    page = as_alice.get(reverse("chat:session", args=[session.pk])).content.decode()
    assert page.count('data-testid="cutoff-badge"') == 1
    assert page.count('data-testid="continue"') == 1
    reply = branch_history(current_branch(session))[-1]
    assert f'hx-post="{reverse("chat:continue", args=[session.pk, reply.pk])}"' in page
    assert "Continue." not in page


def test_only_the_last_reply_of_the_branch_offers_continue(as_alice, session, branch):
    say(branch, "question")
    _reply(branch, "cut", "length")
    say(branch, "next question")
    _reply(branch, "complete", "stop")
    page = as_alice.get(reverse("chat:session", args=[session.pk])).content.decode()
    assert page.count('data-testid="cutoff-badge"') == 1  # the old reply is still shown cut off
    assert 'data-testid="continue"' not in page


def test_a_stopped_reply_keeps_its_own_badge_and_no_continue(as_alice, session, branch):
    say(branch, "question")
    message_append(
        branch=branch,
        role="assistant",
        content="partial",
        metadata={"stopped": True, "finish_reason": "cancelled"},
    )
    page = as_alice.get(reverse("chat:session", args=[session.pk])).content.decode()
    assert 'data-testid="stopped-badge"' in page
    assert 'data-testid="cutoff-badge"' not in page
    assert 'data-testid="continue"' not in page


def test_continue_extends_the_cut_off_reply_in_place(
    as_alice, session, branch, fake_llm, inline_turns, django_capture_on_commit_callbacks
):
    say(branch, "question")
    _reply(branch, "the first half", "interrupted")
    fake_llm.queue(Reply(" and the rest."))
    cut = branch_history(current_branch(session))[-1]
    with django_capture_on_commit_callbacks(execute=True):
        response = as_alice.post(reverse("chat:continue", args=[session.pk, cut.pk]), **HX)
    assert response.status_code == 200
    stored = branch_history(current_branch(session))
    # No "Continue." message: the continuation is an assistant message joined to the reply.
    assert [(m.role, m.content) for m in stored] == [
        ("user", "question"),
        ("assistant", "the first half"),
        ("assistant", " and the rest."),
    ]
    assert stored[-1].metadata["continues"] == cut.pk
    page = as_alice.get(reverse("chat:session", args=[session.pk])).content.decode()
    assert 'data-testid="continue"' not in page
    assert page.count('data-role="assistant"') == 1  # one reply, extended
    assert "the first half and the rest." in page


# --- the demo model's hint ---------------------------------------------------------------------


def test_the_demo_hint_shows_under_the_composer_with_the_demo_model(as_alice, session, settings):
    settings.OPENAI_API_KEY = ""
    settings.OPENAI_BASE_URL = ""
    page = as_alice.get(reverse("chat:session", args=[session.pk])).content.decode()
    assert 'data-testid="demo-hint"' in page
    assert "Esc stops a reply" in page


def test_no_demo_hint_with_a_real_model(as_alice, session, fake_llm):
    page = as_alice.get(reverse("chat:session", args=[session.pk])).content.decode()
    assert 'data-testid="demo-hint"' not in page
    assert "demo model" not in page.lower()
    assert "Esc stops a reply" in page


def test_the_header_shows_the_session_key_escaped(as_alice, alice):
    from sessions_app.services import session_for_key

    keyed = session_for_key(owner=alice, session_key="agent:x:main:<b>&\"'")
    page = as_alice.get(reverse("chat:session", args=[keyed.pk])).content.decode()
    shown = re.search(
        r'<code class="badge session-key" data-testid="session-key"[^>]*>(.*?)</code>', page
    )
    assert shown is not None
    assert shown.group(1) == "agent:x:main:&lt;b&gt;&amp;&quot;&#x27;"
    assert "<b>&" not in page


def test_the_header_shows_no_key_for_a_session_without_one(as_alice, session):
    page = as_alice.get(reverse("chat:session", args=[session.pk])).content.decode()
    assert 'data-testid="session-key"' not in page


def test_a_users_message_is_shown_as_typed(as_alice, session, branch):
    typed = "# comment\ndef f(*args, **kwargs):\n    return [x for x in args]\n\n<b>1 < 2</b>"
    message_append(branch=branch, role="user", content=typed)
    page = as_alice.get(reverse("chat:session", args=[session.pk])).content.decode()
    body = re.search(r'<div class="body plain" data-testid="user-text">(.*?)</div>', page, re.S)
    assert body is not None
    # Escaped, every character and line kept: no heading, no emphasis, no HTML.
    assert body.group(1) == typed.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    assert "<h1>comment" not in page


def test_a_refresh_reads_each_part_once(as_alice, session, branch):
    """The refresh (every region of the page) reads the current branch, and the branches its
    labels, tree and versions are made from, once each."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    say(branch, "a", "b")
    checkpoint_create(branch=branch, name="cp")
    with CaptureQueriesContext(connection) as seen:
        response = as_alice.get(reverse("chat:refresh", args=[session.pk]), **HX)
    assert response.status_code == 200
    branches = [
        q["sql"]
        for q in seen.captured_queries
        if re.match(r'SELECT .* FROM "sessions_app_internalsession"', q["sql"])
    ]
    current = [sql for sql in branches if '"is_current"' in sql.split(" WHERE ", 1)[-1]]
    assert len(current) == 1, current
    assert len(branches) == 2, branches  # the current one, and all of them (labels, tree)
