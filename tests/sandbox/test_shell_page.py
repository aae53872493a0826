"""A sandboxed command's run on the chat page: its command, output and exit code as a terminal
block, the files it changed linked to the Files panel; a refusal stays a plain result."""

from __future__ import annotations

import html

import pytest
from django.urls import reverse

from checkpoints.services import checkpoint_create
from sessions_app.selectors import current_branch
from tests.conftest import ask
from workspace.services import file_write

pytestmark = pytest.mark.django_db(transaction=True)


def page(client, session) -> str:
    return html.unescape(client.get(reverse("chat:session", args=[session.pk])).content.decode())


def test_a_run_shows_as_a_terminal_block_with_its_files_linked(demo, client, alice, session):
    ask(session, "run echo '<b>hi</b>' > a.txt; cat a.txt; exit 4")
    client.force_login(alice)
    response = client.get(reverse("chat:session", args=[session.pk]))
    body = response.content.decode()
    assert 'data-testid="terminal"' in body
    assert "&lt;b&gt;hi&lt;/b&gt;" in body  # the output is text, never markup
    assert "<b>hi</b>" not in body.split('data-testid="terminal"', 1)[1].split("</pre>", 1)[0]
    shown = page(client, session)
    assert "$ echo '<b>hi</b>' > a.txt; cat a.txt; exit 4" in shown
    assert "exit code 4" in shown
    view = reverse("chat:file_view", args=[session.pk, "a.txt"])
    assert f'hx-get="{view}"' in body
    assert 'data-testid="terminal-file">a.txt</a>' in body


def test_a_refused_run_is_shown_as_its_plain_result(demo, client, alice, session):
    ask(session, "run the tests")
    client.force_login(alice)
    shown = page(client, session)
    assert 'data-testid="terminal"' not in shown
    assert "This session has no test command yet" in shown


def test_a_runs_files_link_to_the_comparison_with_the_checkpoint_before(
    demo, client, alice, session
):
    branch = current_branch(session)
    file_write(branch=branch, path="notes.txt", content="old\n")
    before = checkpoint_create(branch=branch, name="before the run")
    turn = ask(session, "run echo new > notes.txt; echo made > made.txt")
    assert turn.checkpoint is not None  # the run's automatic checkpoint
    client.force_login(alice)
    shown = page(client, session)
    compare = reverse("chat:compare", args=[session.pk])
    link = f"{compare}?from=checkpoint:{before.pk}&to=checkpoint:{turn.checkpoint.pk}"
    assert f'<a href="{link}" data-testid="terminal-compare">' in shown

    diff = html.unescape(client.get(link).content.decode())
    assert "made.txt" in diff
    assert "-old" in diff
    assert "+new" in diff


def test_a_run_with_no_checkpoint_before_it_has_no_compare_link(demo, client, alice, session):
    ask(session, "run echo new > notes.txt")
    client.force_login(alice)
    assert 'data-testid="terminal-compare"' not in page(client, session)
