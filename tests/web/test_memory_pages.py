"""The memories page: list, ranked search, add, edit, delete; bad input is a form error that
writes nothing; bob never sees or changes alice's memories; the page says a restore or a rewind
does not erase them; untrusted text is escaped and the details' Markdown sanitised."""

from __future__ import annotations

import pytest
from django.test import Client

from memories.models import Memory
from memories.services import memory_create

pytestmark = pytest.mark.django_db


@pytest.fixture
def page(alice) -> Client:
    client = Client()
    client.force_login(alice)
    return client


def make(user, key, l0, **kwargs):
    return memory_create(user=user, key=key, category="Project", l0_abstract=l0, **kwargs)


def test_the_page_lists_searches_and_says_memories_outlive_a_rewind(page, alice):
    make(alice, "deep", "Notes", l2_details="helix")
    make(alice, "top", "Uses helix")
    answer = page.get("/memories/")
    text = answer.content.decode()
    assert answer.status_code == 200
    assert "restoring or rewinding a conversation does not erase them" in text
    assert text.index("Uses helix") < text.index("Notes")  # newest first
    ranked = page.get("/memories/", {"q": "helix"}).content.decode()
    assert ranked.index("Uses helix") < ranked.index("Notes")
    assert page.get("/memories/", {"q": '"foo" OR -bar (baz'}).status_code == 200


def test_add_edit_delete(page, alice):
    data = {"key": "editor", "category": "Skill", "l0_abstract": "Uses Helix", "confidence": "0.5"}
    assert page.post("/memories/", data).status_code == 302
    memory = Memory.objects.get(user=alice)
    assert (memory.category, memory.confidence) == ("Skill", 0.5)
    edit = f"/memories/{memory.pk}/edit/"
    assert "Uses Helix" in page.get(edit).content.decode()
    assert page.post(edit, {**data, "l0_abstract": "Uses Vim"}).status_code == 302
    memory.refresh_from_db()
    assert memory.l0_abstract == "Uses Vim"
    assert page.post(f"/memories/{memory.pk}/delete/").status_code == 302
    assert not Memory.objects.exists()


@pytest.mark.parametrize(
    ("data", "words"),
    [
        ({"key": "k", "category": "Gossip", "l0_abstract": "x", "confidence": "1"}, "Gossip"),
        (
            {"key": "two words", "category": "Project", "l0_abstract": "x", "confidence": "1"},
            "identifier",
        ),
        ({"key": "k", "category": "Project", "l0_abstract": "x", "confidence": "2"}, "1"),
        (
            {
                "key": "k",
                "category": "Project",
                "l0_abstract": "x",
                "l2_details": "z" * 20_001,
                "confidence": "1",
            },
            "The details are 20001 characters long; the limit is 20000",
        ),
    ],
)
def test_bad_input_is_a_form_error_and_writes_nothing(page, data, words):
    answer = page.post("/memories/", data)
    assert answer.status_code == 400
    assert words in answer.content.decode()
    assert not Memory.objects.exists()


def test_the_form_names_its_fields_in_plain_words(page):
    form = page.get("/memories/").content.decode()
    for label in ("Summary (one line)", "Overview (two or three sentences)", "Details (Markdown)"):
        assert label in form
    # The old labels ("L0: one line"...); not a bare "L0", which a random token may hold.
    for internal in ("L0:", "L1:", "L2:"):
        assert internal not in form


def test_a_duplicate_key_is_a_form_error(page, alice):
    make(alice, "editor", "Uses Helix")
    data = {"key": "Editor", "category": "Project", "l0_abstract": "x", "confidence": "1"}
    answer = page.post("/memories/", data)
    assert answer.status_code == 400
    assert "already have a memory" in answer.content.decode()
    assert Memory.objects.count() == 1


def test_bob_never_sees_or_changes_alices_memories(alice, bob):
    memory = make(alice, "editor", "alice-secret helix")
    client = Client()
    client.force_login(bob)
    assert "alice-secret" not in client.get("/memories/", {"q": "helix"}).content.decode()
    data = {"key": "x", "category": "Project", "l0_abstract": "pwned", "confidence": "1"}
    assert client.get(f"/memories/{memory.pk}/edit/").status_code == 404
    assert client.post(f"/memories/{memory.pk}/edit/", data).status_code == 404
    assert client.post(f"/memories/{memory.pk}/delete/").status_code == 404
    memory.refresh_from_db()
    assert memory.l0_abstract == "alice-secret helix"


def test_untrusted_text_is_escaped_and_details_sanitised(page, alice):
    make(
        alice,
        "xss",
        "<script>alert(1)</script>",
        l1_overview="<img src=x onerror=alert(2)>",
        l2_details="**bold** <script>alert(3)</script>",
    )
    text = page.get("/memories/").content.decode()
    assert "<script>alert(1)" not in text
    assert "&lt;script&gt;alert(1)" in text
    assert "<img src=x" not in text
    assert "<strong>bold</strong>" in text
    assert "<script>alert(3)" not in text
