"""session_settings_update: the chat page's model picker and instructions dialog write through
session_update (checked, announced), keeping the rest of the metadata."""

from __future__ import annotations

import pytest

from accounts.errors import InvalidPreference
from accounts.services import preferences_update
from core.errors import InvalidInput
from core.events import listen
from core.model_choice import INSTRUCTIONS_MAX_CHARS
from sessions_app.models import Session
from sessions_app.services import session_settings_update, session_update


@pytest.mark.django_db(transaction=True)
def test_a_change_keeps_the_other_settings_and_metadata_and_is_announced(session, settings):
    settings.AGENT_ALLOWED_MODELS = ["big-model"]
    session_update(session=session, metadata={"tag": 1, "settings": {"temperature": 0.3}})
    seen: list[dict] = []
    stop = listen(session.pk, seen.append)
    try:
        session_settings_update(session=session, model="big-model")
        session_settings_update(session=session, instructions="  Be brief.  ")
    finally:
        stop()
    session.refresh_from_db()
    assert session.metadata == {
        "tag": 1,
        "settings": {"temperature": 0.3, "model": "big-model", "instructions": "Be brief."},
    }
    assert [e["type"] for e in seen] == ["session.changed", "session.changed"]
    assert seen[-1]["metadata"] == session.metadata

    session_settings_update(session=session, model="", instructions="")
    session.refresh_from_db()
    assert session.metadata == {"tag": 1, "settings": {"temperature": 0.3}}


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"instructions": "x" * (INSTRUCTIONS_MAX_CHARS + 1)}, "the limit is 8,000"),
        ({"instructions": 7}, "must be text"),
        ({"model": "no-such-model"}, "is not allowed"),
        ({"model": ["gpt"]}, "must be text"),
    ],
)
def test_bad_settings_are_refused_and_nothing_is_written(session, changes, message):
    with pytest.raises(InvalidInput, match=message):
        session_settings_update(session=session, **changes)
    assert Session.objects.get(pk=session.pk).metadata == {}


@pytest.mark.django_db
def test_the_users_instructions_are_a_preference_within_the_limit(alice):
    preferences_update(user=alice, auto_checkpoint=True, theme="dark", instructions=" Be kind. ")
    alice.refresh_from_db()
    assert alice.preference("instructions") == "Be kind."
    # Saved without them (an older form): they stay.
    preferences_update(user=alice, auto_checkpoint=False, theme="dark")
    alice.refresh_from_db()
    assert alice.preference("instructions") == "Be kind."
    for bad in ("x" * (INSTRUCTIONS_MAX_CHARS + 1), 12):
        with pytest.raises(InvalidPreference) as refused:
            preferences_update(user=alice, auto_checkpoint=True, theme="light", instructions=bad)
        assert refused.value.field == "instructions"
    alice.refresh_from_db()
    assert alice.preference("instructions") == "Be kind."
    assert alice.preference("theme") == "dark"
