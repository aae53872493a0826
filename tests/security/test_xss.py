"""Output safety: a corpus of script injection payloads (tests/security/xss_corpus.py) put in
every place user or model text reaches a page, and proof that each one is inert there.

The payloads go in through the app's own doors: the services, the chat pages, the import, a real
turn against the local Chat Completions server (replies, tool calls and errors from the model).
Every page, partial and socket frame that shows them is parsed (tests/security/inspect_html.py):
no script, event handler, script or data address, active style or htmx attribute may come from
them, and each payload's marker must be on the page as text, so a page that dropped the text
would not pass unseen. The JSON of the event stream and the API carries the text verbatim, as
data.
"""

from __future__ import annotations

import html
import json
import re
from urllib.parse import quote

import pytest
from asgiref.sync import async_to_sync
from channels.db import database_sync_to_async
from django.core.files.uploadedfile import SimpleUploadedFile
from django.template import Context, Template, TemplateSyntaxError
from django.test import Client

from accounts.models import ApiKey, User
from accounts.services import apikey_create
from agents.worker import run_turn
from checkpoints.models import Checkpoint
from checkpoints.services import checkpoint_create
from checkpoints.transfer import session_export
from sessions_app.models import Branch, Message, Session
from sessions_app.services import branch_fork, message_append, session_create
from sessions_app.turns import turn_fail, turn_start
from tests.fakes.chat_server import Error, Reply, ToolCall, ToolCalls
from tests.security.conftest import bearer, browser, cookie_headers
from tests.security.inspect_html import form_data, inspect
from tests.security.xss_corpus import MARKDOWN_DROPS, NAMES, PAYLOADS, TEMPLATES, marker

pytestmark = pytest.mark.django_db
HX = {"HTTP_HX_REQUEST": "true"}
# A streamed piece on the chat socket: its text, escaped, in a numbered <span> (static/rollback/
# stream.js reads it as text and renders the Markdown through DOMPurify).
DELTA = re.compile(
    r'<div id="turn-\d+-body" hx-swap-oob="beforeend">'
    r'<span class="delta" data-seq="\d+"(?: data-attempt="\d+")?>([^<]*)</span></div>',
    re.S,
)


def assert_inert(page: str | bytes, where: str, shows: list[str] | tuple[str, ...] = ()) -> None:
    """Nothing on `page` can run script, and each of the payloads `shows` is on it, as text."""
    text = page.decode() if isinstance(page, bytes) else page
    report = inspect(text)
    assert not report.problems, f"{where}:\n" + "\n".join(report.problems)
    missing = sorted({marker(p) for p in shows} - report.shown)
    assert not missing, f"{where}: these payloads are not shown as text: {missing}"


def texts_of(page: bytes, testid: str) -> list[str]:
    return inspect(page.decode()).texts.get(testid, [])


@pytest.fixture
def as_alice(alice) -> Client:
    return browser(alice)


def test_the_corpus_is_large_and_every_payload_is_caught_when_not_escaped():
    """The inspector flags each payload where it is dangerous: as raw markup, inside an
    attribute, or rendered by a Markdown renderer that lets HTML and any link through."""
    from markdown_it import MarkdownIt

    unsafe = MarkdownIt("commonmark", {"html": True})
    unsafe.validateLink = lambda url: True
    assert len(PAYLOADS) >= 30
    assert len(NAMES) >= 30
    for payload in PAYLOADS:
        if payload in TEMPLATES:
            # Harmful only if a template engine ran them: Django's would change them.
            try:
                rendered = Template(payload).render(Context({"x": 1}))
            except TemplateSyntaxError:
                continue
            assert rendered != payload, payload
            continue
        contexts = [
            f"<p>{payload}</p>",
            f'<p title="{payload}">x</p>',
            f"<p title='{payload}'>x</p>",
            f"<textarea>{payload}</textarea>",
            f"<title>{payload}</title>",
            unsafe.render(payload),
            f'<div hx-confirm="{payload}"></div>',
        ]
        assert any(inspect(c).problems for c in contexts), f"never caught: {payload!r}"
        escaped = f"<p>{html.escape(payload)}</p><p title='{html.escape(payload)}'></p>"
        assert not inspect(escaped).problems, payload
        assert marker(payload) in inspect(escaped).shown


# --- The chat pages -----------------------------------------------------------------------------


def _history_pages(client: Client, session: Session) -> list[bytes]:
    """The chat page and every earlier page of its history."""
    pages = [client.get(f"/chat/{session.pk}/").content]
    branch = Branch.objects.get(session=session, is_current=True)
    for before in range(branch.message_count - 100, 0, -100):
        pages.append(client.get(f"/chat/{session.pk}/messages/?before={before}").content)
    return pages


def fill_conversation(branch: Branch) -> None:
    """Each payload as a user message, a reply (and the reply's model name), a tool call's name,
    and a tool's name, arguments and result; each one-line payload as a checkpoint's name and
    description."""
    for payload in PAYLOADS:
        message_append(branch=branch, role="user", content=payload)
        message_append(
            branch=branch, role="assistant", content=payload, metadata={"model": payload}
        )
        message_append(
            branch=branch,
            role="assistant",
            tool_calls=[{"id": "c", "type": "function", "function": {"name": payload}}],
        )
        message_append(
            branch=branch,
            role="tool",
            tool_name=payload[:200],
            tool_args={"expression": payload},
            tool_result=payload,
            metadata={"error": True},
        )
    for payload in NAMES:
        # The details of an automatic checkpoint name the tool (a name the model chose).
        metadata = {"tool_name": payload}
        checkpoint_create(branch=branch, name=payload, description=payload, metadata=metadata)


def test_names_descriptions_and_messages_are_inert_on_the_chat_pages(as_alice, alice):
    main = session_create(owner=alice, name="Payloads")
    branch = Branch.objects.get(session=main, is_current=True)
    fill_conversation(branch)
    # A branch forked from each checkpoint: the branch tree names the checkpoint.
    for cp in Checkpoint.objects.filter(branch=branch):
        branch_fork(branch=branch, position=cp.message_count, forked_from_id=cp.pk)
    sessions = []
    for payload in NAMES:
        named = session_create(owner=alice, name=payload)
        turn = turn_start(session=named, message=payload)
        turn_fail(turn=turn, error=payload)
        sessions.append(named)

    pages = _history_pages(as_alice, main)
    joined = b"".join(pages)
    assert_inert(joined, "the conversation, the side bar and the checkpoint panel", PAYLOADS)
    for page in pages:
        assert_inert(page, "one page of the conversation")
    assert_inert(as_alice.get(f"/chat/{main.pk}/refresh/").content, "the refresh", NAMES)
    # Every name on one list: as many as the page has shown (the list pages 50 at a time).
    listed = as_alice.get("/chat/sessions/", {"shown": len(NAMES)}).content
    assert_inert(listed, "the session list", NAMES)

    # The export is a download of JSON, never a page a browser would render.
    export = as_alice.get(f"/chat/{main.pk}/export/")
    assert export["Content-Type"].startswith("application/json")
    assert export["Content-Disposition"].startswith("attachment;")
    assert export["X-Content-Type-Options"] == "nosniff"
    for named, payload in zip(sessions, NAMES, strict=True):
        page = as_alice.get(f"/chat/{named.pk}/").content
        assert_inert(page, f"the page of session {payload!r}", [payload])
        assert texts_of(page, "session-title") == [payload.strip()]
        assert texts_of(page, "turn-error")
        assert payload in texts_of(page, "turn-error")[0]
    for checkpoint in Checkpoint.objects.filter(branch=branch):
        payload = checkpoint.checkpoint_name
        dialog = as_alice.get(f"/chat/checkpoints/{checkpoint.pk}/restore/", **HX).content
        assert_inert(dialog, f"the restore dialog of {payload!r}", [payload])
        detail = as_alice.get(f"/chat/checkpoints/{checkpoint.pk}/", **HX).content
        assert_inert(detail, f"the details of {payload!r}", [payload])
    for message in Message.objects.filter(branch=branch, role="user"):
        form = as_alice.get(f"/chat/{main.pk}/messages/{message.pk}/edit/", **HX).content
        assert_inert(form, f"the edit form of {message.content!r}", [message.content])


def test_renamed_and_deleted_sessions_are_inert_in_the_answer_and_the_notice(as_alice, alice):
    session = session_create(owner=alice, name="before")
    for payload in NAMES:
        response = as_alice.post(
            f"/chat/{session.pk}/rename/?current={session.pk}", {"name": payload}, **HX
        )
        assert response.status_code == 200
        assert_inert(response.content, f"renaming to {payload!r}", [payload])
        assert texts_of(response.content, "session-title") == [payload.strip()]
    doomed = [session_create(owner=alice, name=payload) for payload in NAMES]
    for one in doomed:
        assert as_alice.post(f"/chat/{one.pk}/delete/", **HX).status_code == 204
    page = as_alice.get("/chat/", follow=True).content
    assert_inert(page, "the deletion notices", NAMES)


def test_text_sent_back_in_an_address_or_a_form_is_inert(as_alice, alice, client):
    session = session_create(owner=alice, name="s")
    cp = checkpoint_create(branch=Branch.objects.get(session=session), name="cp")
    for payload in NAMES:
        q = quote(payload)
        found = as_alice.get(f"/chat/sessions/?q={q}&current={q}")
        assert_inert(found.content, f"searching for {payload!r}", [payload])
        login = client.get(f"/accounts/login/?next={q}")
        assert_inert(login.content, f"the log-in page with next={payload!r}")
        restore = as_alice.post(f"/chat/checkpoints/{cp.pk}/restore/", {"mode": payload}, **HX)
        assert restore.status_code == 400
        assert_inert(restore.content, f"restoring in mode {payload!r}", [payload])
        missing = client.get(f"/chat/{q}/")
        assert missing.status_code == 404
        assert_inert(missing.content, f"the 404 page of {payload!r}")
    # A next address that would run script is not followed after logging in.
    answer = client.post(
        "/accounts/login/?next=javascript:alert(1)",
        {"username": "alice", "password": "alice-password-1"},
    )
    assert answer.status_code == 302
    assert answer["Location"] == "/chat/"


def test_an_imported_document_is_inert_in_every_field(as_alice, alice):
    """An export file is anyone's text: names, messages, tool calls and message metadata."""
    source = session_create(owner=alice, name="source")
    fill_conversation(Branch.objects.get(session=source))
    document = session_export(session=source)
    document["session"]["name"] = NAMES[0]
    upload = SimpleUploadedFile("s.json", json.dumps(document).encode(), "application/json")
    response = as_alice.post("/chat/import/", {"document": upload})
    assert response.status_code == 302, response.content[:500]
    imported = Session.objects.filter(owner=alice).order_by("-pk").first()
    assert imported is not None
    assert imported.pk != source.pk
    pages = _history_pages(as_alice, imported)
    assert_inert(b"".join(pages), "the imported session", PAYLOADS)
    # The notice that names the imported session, and one that quotes a rejected document.
    empty = {
        **document,
        "branches": [{**document["branches"][0], "messages": [], "checkpoints": []}],
    }
    for payload in NAMES:
        named = json.dumps({**empty, "session": {**document["session"], "name": payload}})
        upload = SimpleUploadedFile("s.json", named.encode(), "application/json")
        response = as_alice.post("/chat/import/", {"document": upload}, follow=True)
        assert_inert(response.content, f"importing a session named {payload!r}", [payload])
        upload = SimpleUploadedFile("s.json", json.dumps({"format": payload}).encode())
        response = as_alice.post("/chat/import/", {"document": upload}, follow=True)
        assert_inert(response.content, f"an import rejected for {payload!r}")


def test_api_key_names_are_inert_on_the_profile(as_alice, alice):
    for i, payload in enumerate(NAMES):
        response = as_alice.post("/accounts/profile/api-keys/", {"name": payload}, follow=True)
        assert response.redirect_chain[0][1] == 303
        assert_inert(response.content, f"the new key {payload!r}", [payload])
        if i < len(NAMES) - 40:  # at most 50 active keys; revoked ones are listed too
            key = ApiKey.objects.get(user=alice, name=payload.strip())
            revoked = as_alice.post(f"/accounts/profile/api-keys/{key.pk}/revoke/", follow=True)
            assert_inert(revoked.content, f"revoking the key {payload!r}", [payload])
    assert_inert(as_alice.get("/accounts/profile/").content, "the profile's key list", NAMES)


# --- The admin ----------------------------------------------------------------------------------


def test_the_admin_shows_every_payload_as_text(alice, admin_user):
    session = session_create(owner=alice, name="Payloads")
    branch = Branch.objects.get(session=session)
    for payload in PAYLOADS:
        message_append(branch=branch, role="user", content=payload)
        message_append(branch=branch, role="tool", tool_name=payload[:200], tool_result=payload)
    sessions, checkpoints = [], []
    for payload in NAMES:
        sessions.append(session_create(owner=alice, name=payload, metadata={"note": payload}))
        checkpoints.append(checkpoint_create(branch=branch, name=payload, description=payload))
        if len(sessions) <= 40:  # at most 50 active keys
            apikey_create(user=alice, name=payload)
    alice.first_name, alice.last_name = NAMES[0], NAMES[1]
    alice.metadata = {"note": NAMES[2]}
    alice.save()
    admin = browser(admin_user)

    def look(url: str, where: str, shows=()) -> None:
        response = admin.get(url)
        assert response.status_code == 200, (url, response.status_code)
        assert_inert(response.content, where, shows)

    look("/admin/sessions_app/session/", "the session list", NAMES)
    look("/admin/checkpoints/checkpoint/", "the checkpoint list", NAMES)
    look("/admin/accounts/apikey/", "the API key list", NAMES[:40])
    look("/admin/sessions_app/message/", "the message list")
    look("/admin/sessions_app/branch/", "the branch list")
    look("/admin/accounts/user/", "the user list")
    look(f"/admin/accounts/user/{alice.pk}/change/", "alice's page", NAMES[:3])
    # The branch page: its last 50 messages, and its checkpoints.
    look(f"/admin/sessions_app/branch/{branch.pk}/change/", "the branch page", NAMES)
    for one in sessions:
        name = one.session_name
        look(f"/admin/sessions_app/session/{one.pk}/change/", f"session {name!r}", [name])
        look(f"/admin/sessions_app/session/{one.pk}/delete/", f"deleting {name!r}", [name])
    for cp in checkpoints:
        name = cp.checkpoint_name
        look(f"/admin/checkpoints/checkpoint/{cp.pk}/change/", f"checkpoint {name!r}", [name])
    for message in Message.objects.filter(branch=branch):
        look(f"/admin/sessions_app/message/{message.pk}/change/", f"message {message.pk}")
    for payload in NAMES:
        look(
            f"/admin/sessions_app/session/?q={quote(payload)}",
            f"searching the sessions for {payload!r}",
        )
    # The operator's dashboard: failed turns' errors (long ones open in <details>), the names of
    # their sessions, and usernames.
    for i, (one, payload) in enumerate(zip(sessions[:20], PAYLOADS, strict=False)):
        assert turn_fail(turn=turn_start(session=one, message="hi"), error=payload + " ." * i * 5)
    for payload in NAMES[20:25]:
        User.objects.create(username=payload)
    look("/admin/dashboard/", "the operator's dashboard", [*NAMES[:25], *PAYLOADS[:20]])
    # A change made in the admin is remembered under the object's name: its history page.
    one = sessions[0]
    url = f"/admin/sessions_app/session/{one.pk}/change/"
    data = form_data(admin.get(url).content.decode(), "session_form")
    response = admin.post(url, {**data, "session_name": NAMES[3]})
    assert response.status_code == 302, response.content[:2000]
    look(f"/admin/sessions_app/session/{one.pk}/history/", "the history", [NAMES[3]])
    look("/admin/", "the recent actions", [NAMES[3]])


# --- What the model says, live and stored ---------------------------------------------------------


def _tool_turns() -> list[tuple[list, str]]:
    """Turns in which the model calls tools with payloads: a tool that does not exist, the
    calculator, and a checkpoint named by the model."""
    turns = []
    for i, payload in enumerate(NAMES[:12]):
        calls = [
            ToolCall(payload, {"x": payload}, id=f"call_a{i}"),
            ToolCall("calculate", {"expression": payload}, id=f"call_b{i}"),
            ToolCall("create_checkpoint", {"name": payload}, id=f"call_c{i}"),
        ]
        turns.append(([ToolCalls(calls), Reply(f"done {marker(payload)}")], payload))
    return turns


@pytest.mark.django_db(transaction=True)
def test_model_replies_tool_output_and_errors_are_inert_live_and_stored(fake_llm, alice):
    """Real turns against the local model server, watched through both sockets: the chat
    page's (HTML fragments) and the event stream (JSON)."""
    from channels.testing import WebsocketCommunicator

    from rollback_site.asgi import application

    session = session_create(owner=alice, name="live")
    script: list[tuple[list, str, str]] = [([Reply(p)], p, p) for p in PAYLOADS]
    script += [(items, "use the tools", payload) for items, payload in _tool_turns()]
    script += [([Error(400, message=p)], "fail", p) for p in NAMES[:10]]

    page_socket = cookie_headers(alice, origin="http://localhost")
    integration = [(b"authorization", f"Bearer {bearer(alice).secret}".encode())]

    async def run() -> list[tuple[str, list[dict], list[str]]]:
        chat = WebsocketCommunicator(application, f"/ws/chat/{session.pk}/", headers=page_socket)
        stream = WebsocketCommunicator(
            application, f"/ws/v1/sessions/{session.pk}/", headers=integration
        )
        assert (await chat.connect(timeout=5))[0]
        assert (await stream.connect(timeout=5))[0]
        seen = []
        for items, question, payload in script:
            fake_llm.queue(*items)
            turn = await database_sync_to_async(turn_start)(session=session, message=question)
            await database_sync_to_async(run_turn)(turn.pk)
            events: list[dict] = []
            while not events or events[-1]["type"] not in ("turn.finished", "turn.failed"):
                frame = await stream.receive_from(timeout=10)
                events.append(json.loads(frame))
            # The chat socket sends one fragment for each event it shows: not a tool's end, nor
            # the automatic checkpoint made in the commit that ends the turn it watches (the
            # turn's end has the page fetch its one refresh for both).
            shown = [
                e
                for e in events
                if e["type"] != "tool.finished"
                and not (e["type"] == "checkpoint.created" and e["is_auto"])
            ]
            fragments = [await chat.receive_from(timeout=10) for _ in shown]
            seen.append((payload, events, fragments))
        await chat.disconnect(timeout=10)
        await stream.disconnect(timeout=10)
        return seen

    seen = async_to_sync(run)()
    for (_, question, _), (payload, events, fragments) in zip(script, seen, strict=True):
        where = f"the turn about {payload!r}"
        deltas = "".join(e["delta"] for e in events if e["type"] == "message.delta")
        pieces = []
        for fragment in fragments:
            assert_inert(fragment, f"a chat socket frame of {where}")
            body = DELTA.fullmatch(fragment.strip())
            if body:
                pieces.append(html.unescape(body.group(1)))
        # The stream carries the text as it is; the chat page's fragments carry it escaped.
        assert "".join(pieces) == deltas, where
        last = events[-1]
        if question == "fail":
            assert last["type"] == "turn.failed", where
            assert payload in last["error"], where
        else:
            assert last["type"] == "turn.finished", where
        if question == payload:  # a plain reply: streamed and finished as it was written
            assert deltas == payload, where
            assert last["reply"] == payload, where
        if question == "use the tools":  # the JSON events carry the model's text verbatim
            started = [e["args"] for e in events if e["type"] == "tool.started"]
            assert {"expression": payload} in started, where
            assert {"name": payload} in started, where
            made = [e["name"] for e in events if e["type"] == "checkpoint.created"]
            assert payload in made, where

    as_alice = browser(alice)
    pages = _history_pages(as_alice, session)
    shown = [p for p in PAYLOADS if p not in MARKDOWN_DROPS]  # only Markdown shows them here
    assert_inert(b"".join(pages), "the stored conversation", shown)
    assert_inert(as_alice.get(f"/chat/{session.pk}/").content, "the last failure", NAMES[9:10])
    names = set(Checkpoint.objects.values_list("checkpoint_name", flat=True))
    assert set(NAMES[:12]) <= names, "the model's checkpoints were not made"

    api = bearer(alice)
    listed = api.get(f"/api/v1/sessions/{session.pk}/messages/?limit=1000")
    assert listed["Content-Type"] == "application/json"
    contents = [m["content"] for m in listed.json()["results"]]
    assert all(p in contents for p in PAYLOADS), "the API does not give the text back verbatim"
