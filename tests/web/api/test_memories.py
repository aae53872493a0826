"""/api/v1/memories/ (the public contract): list (newest first, or ranked with q), create,
read, change, delete; another user's memory is a 404; bad input is a clear 4xx that writes
nothing, never a 500."""

from __future__ import annotations

import pytest

from memories.models import Memory
from memories.services import memory_create

pytestmark = pytest.mark.django_db

URL = "/api/v1/memories/"
FIELDS = {
    "id",
    "key",
    "category",
    "l0_abstract",
    "l1_overview",
    "l2_details",
    "confidence",
    "access_count",
    "created_at",
    "updated_at",
}


def make(user, key, l0, **kwargs):
    return memory_create(user=user, key=key, category="Project", l0_abstract=l0, **kwargs)


def test_create_read_change_delete(api, alice):
    created = api.post(
        URL,
        {
            "key": "Editor",
            "category": "Environment",
            "l0_abstract": "Uses Helix",
            "l1_overview": "Since 2023.",
            "l2_details": "# Config\n`config.toml`",
            "confidence": 0.8,
        },
        format="json",
    )
    assert created.status_code == 201, created.json()
    body = created.json()
    assert set(body) == FIELDS
    assert (body["key"], body["category"], body["confidence"], body["access_count"]) == (
        "editor",
        "Environment",
        0.8,
        0,
    )
    url = f"{URL}{body['id']}/"
    assert api.get(url).json() == body
    changed = api.patch(
        url, {"l0_abstract": "Uses Helix daily", "category": "Skill"}, format="json"
    )
    assert changed.status_code == 200
    assert changed.json()["l0_abstract"] == "Uses Helix daily"
    assert changed.json()["category"] == "Skill"
    assert changed.json()["l1_overview"] == "Since 2023."
    assert api.delete(url).status_code == 204
    assert api.get(url).status_code == 404
    assert not Memory.objects.exists()


def test_the_list_is_newest_first_paginated_and_ranked_with_q(api, alice):
    make(alice, "deep", "Notes", l2_details="helix")
    make(alice, "top", "Uses helix")
    make(alice, "other", "Nothing")
    listed = api.get(URL, {"limit": 2}).json()
    assert listed["count"] == 3
    assert listed["next"]
    assert listed["previous"] is None
    assert [m["key"] for m in listed["results"]] == ["other", "top"]
    ranked = api.get(URL, {"q": "helix"}).json()
    assert [m["key"] for m in ranked["results"]] == ["top", "deep"]


@pytest.mark.parametrize(
    "q", ['"foo" OR -bar (baz', "*:&|!", "NEAR(", "'\"", "a" * 5000, "日本語", "%00"]
)
def test_any_search_text_answers_200(api, alice, q):
    make(alice, "editor", "Uses foo")
    answer = api.get(URL, {"q": q})
    assert answer.status_code == 200
    assert answer.json()["count"] in (0, 1)


def test_a_nul_in_the_search_is_a_400(api):
    assert api.get(URL, {"q": "a\x00b"}).status_code == 400


def test_a_duplicate_key_is_a_409_and_writes_nothing(api, alice):
    make(alice, "editor", "Uses Helix")
    answer = api.post(
        URL, {"key": "EDITOR", "category": "Project", "l0_abstract": "other"}, format="json"
    )
    assert answer.status_code == 409
    assert "already have a memory" in answer.json()["detail"]
    other = make(alice, "shell", "fish")
    renamed = api.patch(f"{URL}{other.pk}/", {"key": "editor"}, format="json")
    assert renamed.status_code == 409
    assert sorted(Memory.objects.values_list("key", flat=True)) == ["editor", "shell"]


@pytest.mark.parametrize(
    ("body", "status", "words"),
    [
        ({"key": "k", "category": "Gossip", "l0_abstract": "x"}, 400, "Unknown category"),
        ({"key": "k", "category": "Project", "l0_abstract": "x" * 201}, 400, "limit is 200"),
        (
            {"key": "k", "category": "Project", "l0_abstract": "x", "l1_overview": "y" * 1001},
            400,
            "1000",
        ),
        (
            {"key": "k", "category": "Project", "l0_abstract": "x", "l2_details": "z" * 20_001},
            413,
            "20000",
        ),
        ({"key": "two words", "category": "Project", "l0_abstract": "x"}, 400, "identifier"),
        ({"key": "k" * 101, "category": "Project", "l0_abstract": "x"}, 400, "limit is 100"),
        ({"key": "k", "category": "Project", "l0_abstract": "  "}, 400, "cannot be empty"),
        (
            {"key": "k", "category": "Project", "l0_abstract": "x", "confidence": 1.5},
            400,
            "0 and 1",
        ),
        (
            {"key": "k", "category": "Project", "l0_abstract": "x", "confidence": "0.5"},
            400,
            "confidence",
        ),
        (
            {"key": "k", "category": "Project", "l0_abstract": "x", "confidence": True},
            400,
            "confidence",
        ),
        ({"key": 5, "category": "Project", "l0_abstract": "x"}, 400, "key"),
        ({"key": "k", "category": ["Project"], "l0_abstract": "x"}, 400, "category"),
        ({"key": "k", "category": "Project", "l0_abstract": None}, 400, "l0_abstract"),
        ({"key": "k", "category": "Project"}, 400, "l0_abstract"),
        (
            {"key": "k", "category": "Project", "l0_abstract": "x", "access_count": 9},
            400,
            "Unknown",
        ),
        ({"key": "k", "category": "Project", "l0_abstract": "a\x00b"}, 400, ""),
        ([1, 2], 400, ""),
        ("just text", 400, ""),
    ],
)
def test_bad_input_is_a_clear_4xx_and_writes_nothing(api, body, status, words):
    answer = api.post(URL, body, format="json")
    assert answer.status_code == status, answer.content
    assert words in answer.json()["detail"]
    assert not Memory.objects.exists()


def test_a_lone_surrogate_is_a_400(api):
    body = '{"key": "k", "category": "Project", "l0_abstract": "a\\ud800"}'
    answer = api.post(URL, body, content_type="application/json")
    assert answer.status_code == 400
    assert "urrogate" in answer.json()["detail"]
    assert not Memory.objects.exists()


def test_malformed_json_is_a_400(api):
    answer = api.post(URL, '{"key": "k", ', content_type="application/json")
    assert answer.status_code == 400
    assert "detail" in answer.json()
    assert not Memory.objects.exists()


def test_a_bad_patch_changes_nothing(api, alice):
    memory = make(alice, "editor", "Uses Helix")
    for body in ({"category": "Nope"}, {"l2_details": "z" * 20_001}, {"confidence": -1}):
        assert api.patch(f"{URL}{memory.pk}/", body, format="json").status_code in (400, 413)
    memory.refresh_from_db()
    assert (memory.category, memory.l2_details, memory.confidence) == ("Project", "", 1.0)


def test_bob_never_sees_or_touches_alices_memories(api, bob_api, alice):
    memory = make(alice, "editor", "alice-secret helix")
    url = f"{URL}{memory.pk}/"
    assert bob_api.get(URL).json()["count"] == 0
    assert bob_api.get(URL, {"q": "helix"}).json()["count"] == 0
    for answer in (
        bob_api.get(url),
        bob_api.patch(url, {"l0_abstract": "pwned"}, format="json"),
        bob_api.delete(url),
    ):
        assert answer.status_code == 404
        assert "alice-secret" not in answer.content.decode()
    # Bob may use the same key for a memory of his own.
    mine = bob_api.post(
        URL, {"key": "editor", "category": "Project", "l0_abstract": "vim"}, format="json"
    )
    assert mine.status_code == 201
    memory.refresh_from_db()
    assert memory.l0_abstract == "alice-secret helix"


def test_anonymous_is_a_401(client):
    assert client.get(URL).status_code in (401, 403)
