"""The bot's commands in a linked chat, through the webhook, with real turns against the fake
Chat Completions server: the same services as `manage.py chat`."""

from __future__ import annotations

import pytest

from checkpoints.models import Checkpoint
from integrations.models import TelegramReply
from integrations.telegram.commands import HELP, parse_command
from integrations.telegram.conversations import session_key
from integrations.telegram.links import link_code_consume, link_code_create
from sessions_app.models import Branch, Session, Turn
from tests.fakes.chat_server import Reply, ToolCall, ToolCalls
from tests.integrations.updates import CHAT, message, post, said

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def bot(client, telegram, fake_llm, inline_turns, alice):
    """A chat linked to alice; `bot(text)` posts it and returns what the bot sent back to
    it (by sendMessage) since, but for the relay's messages of replies (the relay is tested on
    its own); for a turn, once the relay has delivered its reply."""
    link_code_consume(code=link_code_create(user=alice).code, chat_id=CHAT, title="@alice_tg")

    def send(text: str) -> list[str]:
        before = len(said(telegram))
        assert post(client, message(text)).status_code == 200
        if parse_command(text) is None:
            delivered(telegram)
        replies = {turn.reply for turn in Turn.objects.all()}
        return [text for text in said(telegram)[before:] if text not in replies]

    return send


def delivered(telegram) -> None:
    """Wait until the relay has delivered the reply of every turn started from Telegram."""
    telegram.wait_for(
        lambda _: not TelegramReply.objects.filter(delivered_at__isnull=True).exists()
    )


def the_session(alice) -> Session:
    return Session.objects.get(owner=alice, session_key=session_key(CHAT))


def test_commands_parse_with_the_bot_name_and_in_any_case():
    assert parse_command("/CheckPoint@rollback_test_bot  my name ") == ("checkpoint", "my name")
    assert parse_command("/list") == ("list", "")
    assert parse_command("/rollback\nfirst") == ("rollback", "first")
    assert parse_command("hello /list") is None
    assert parse_command("/") is None


def test_checkpoint_list_rollback_and_branches_work_on_the_chats_session(bot, fake_llm, alice):
    fake_llm.queue(Reply("Hi Alice."))
    bot("hello")
    [made] = bot("/checkpoint first")
    checkpoint = Checkpoint.objects.get(checkpoint_name="first")
    assert made == f"✓ Checkpoint 'first' created successfully (ID: {checkpoint.pk})"
    assert checkpoint.branch.session == the_session(alice)
    listed = bot("/list")[0]
    assert f"ID: {checkpoint.pk} | first | Type: manual" in listed

    fake_llm.queue(Reply("Noted."))
    bot("remember 42")
    before = the_session(alice)
    [rolled] = bot(f"/rollback {checkpoint.pk}")
    branch = Branch.objects.get(session=before, is_current=True)
    assert rolled == f"Rolled back to checkpoint 'first'. Now on branch {branch.pk} (2 messages)."
    assert branch.forked_from == checkpoint

    [branches] = bot("/branches")
    lines = branches.splitlines()
    assert lines[0] == "2 branches (* = current):"
    assert any(line.startswith(f"* branch {branch.pk} (from branch") for line in lines)
    assert sum(line.startswith("*") for line in lines) == 1


def test_rollback_by_name_and_its_refusals(bot, fake_llm):
    fake_llm.queue(Reply("Hi."))
    bot("hello")
    bot("/checkpoint start")
    assert bot("/rollback start")[0].startswith("Rolled back to checkpoint 'start'.")
    assert bot("/rollback")[0] == "Say which checkpoint: /rollback ID_OR_NAME (see /list)"
    assert bot("/rollback nowhere")[0].endswith("Use /list to see the checkpoints.")


def test_checkpoint_needs_a_name_and_a_valid_one(bot):
    assert bot("/checkpoint") == ["Give the checkpoint a name: /checkpoint NAME"]
    [refused] = bot("/checkpoint " + "x" * 300)
    assert refused.startswith("✗ Could not create the checkpoint:")
    assert not Checkpoint.objects.exists()


def test_list_with_no_checkpoints_says_so(bot):
    assert bot("/list") == ["No checkpoints yet."]


def test_new_moves_the_key_to_a_new_session_and_keeps_the_old_one(bot, fake_llm, alice):
    fake_llm.queue(Reply("Hi."))
    bot("hello")
    old = the_session(alice)
    [answer] = bot("/new")
    new = the_session(alice)
    assert new.pk != old.pk
    assert answer.startswith(f"A new conversation has started (session {new.pk}).")
    old.refresh_from_db()
    assert old.session_key == ""
    assert old.turns.count() == 1
    fake_llm.queue(Reply("Fresh."))
    bot("again")
    assert new.turns.count() == 1
    assert old.turns.count() == 1


def test_new_at_the_session_limit_is_refused_and_keeps_the_session(bot, settings, alice):
    bot("/list")  # makes the chat's session
    settings.ROLLBACK_MAX_SESSIONS_PER_USER = 1
    [refused] = bot("/new")
    assert "the most one account may keep is 1" in refused
    assert Session.objects.get(owner=alice).session_key == session_key(CHAT)


def test_help_start_and_an_unknown_command(bot, alice):
    assert bot("/help") == [HELP]
    assert bot("/START") == ["This chat is already linked to alice. Send /help for the commands."]
    [unknown] = bot("/frobnicate now")
    assert unknown == f"Unknown command /frobnicate.\n{HELP}"


def test_another_users_chat_commands_never_reach_alices_session(bot, fake_llm, alice, bob):
    fake_llm.queue(Reply("Hi."))
    bot("hello")
    bot("/checkpoint mine")
    link_code_consume(code=link_code_create(user=bob).code, chat_id=CHAT, title="bob")
    assert bot("/list") == ["No checkpoints yet."]
    assert bot("/rollback mine")[0].endswith("Use /list to see the checkpoints.")
    assert Session.objects.get(owner=bob).session_key == session_key(CHAT)
    assert the_session(alice).turns.count() == 1


def test_a_rollback_says_what_it_could_not_undo(bot, fake_llm, alice):
    """A memory saved after the checkpoint outlives the rollback: the chat is told so, as the
    terminal's chat is."""
    fake_llm.queue(Reply("Hi Alice."))
    bot("hello")
    bot("/checkpoint start")
    fake_llm.queue(
        ToolCalls([ToolCall("remember", {"key": "pet", "category": "Comm", "l0": "Has a cat"})]),
        Reply("Noted."),
    )
    bot("I have a cat")
    [answer] = bot("/rollback start")
    assert answer.startswith("Rolled back to checkpoint 'start'.")
    assert "\n[cannot undo] remember (" in answer
