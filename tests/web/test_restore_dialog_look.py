"""The restore dialog's rewind note, as the server renders it: a warning (in red) only when a
rewind deletes something; a quiet note when nothing comes after the checkpoint."""

from __future__ import annotations

import html
import re

import pytest
from django.urls import reverse

from checkpoints.services import checkpoint_create, checkpoint_restore
from tests.conftest import say
from workspace.services import file_delete, file_write

pytestmark = pytest.mark.django_db

HX = {"HTTP_HX_REQUEST": "true"}


@pytest.fixture
def as_alice(client, alice):
    client.force_login(alice)
    return client


def note(client, checkpoint) -> tuple[str, str]:
    response = client.get(reverse("chat:checkpoint_restore", args=[checkpoint.pk]), **HX)
    assert response.status_code == 200
    found = re.search(
        r'<span class="([^"]+)" data-testid="rewind-warning">(.*?)</span>', response.text
    )
    assert found is not None
    return found.group(1), found.group(2)


def test_a_rewind_that_deletes_nothing_is_not_a_warning(as_alice, branch):
    say(branch, "one", "reply one")
    last = checkpoint_create(branch=branch, name="at the end")
    assert note(as_alice, last) == (
        "muted",
        "Nothing comes after this checkpoint on “main”: nothing is deleted.",
    )


def test_a_rewind_that_deletes_messages_is_a_warning(as_alice, branch):
    say(branch, "one", "reply one")
    early = checkpoint_create(branch=branch, name="early")
    say(branch, "two", "reply two")
    kind, text = note(as_alice, early)
    assert kind == "warning"
    assert "permanently deletes 2 later messages" in text


def test_a_rewind_that_deletes_only_file_edits_and_a_checkpoint_is_a_warning(as_alice, branch):
    """Edits in the Files panel after a checkpoint, then another checkpoint at the same message:
    a rewind to the first deletes the edits and the second checkpoint (which holds them), and
    the branch restored from it, and the dialog says so."""
    say(branch, "one", "reply one")
    file_write(branch=branch, path="plan.md", content="v1")
    file_write(branch=branch, path="old.md", content="old")
    first = checkpoint_create(branch=branch, name="first")
    file_write(branch=branch, path="plan.md", content="v2")
    file_delete(branch=branch, path="old.md")
    second = checkpoint_create(branch=branch, name="second")
    checkpoint_restore(checkpoint=second)

    kind, text = note(as_alice, first)

    assert kind == "warning"
    assert html.unescape(text) == (
        "Cuts the branch “main” back to this checkpoint: permanently deletes 0 later messages, "
        "1 later checkpoint, 2 later file changes and 1 branch forked from them."
    )
