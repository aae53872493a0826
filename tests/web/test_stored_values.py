"""No stored value can break a page.

The database keeps every time a user can influence between 1970 and 2099 (a CHECK constraint
per column), and the services keep names, metadata and session state within their limits. Here
rows are written at those extremes directly, as any path could write them (an import, the admin,
an older version), and every page that lists or shows them must still answer 200: the chat
pages, the API and the admin, in the time zones furthest from UTC.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from urllib.parse import urlencode
from zoneinfo import ZoneInfo

import pytest
from django.db import IntegrityError, models, transaction
from django.urls import reverse
from django.utils import timezone

from checkpoints.models import Checkpoint
from core.validation import (
    JSON_MAX_DEPTH,
    NAME_MAX_LENGTH,
    TIME_MAX,
    TIME_MIN,
    clean_metadata,
    clean_name,
    clean_session_state,
    json_size,
)
from sessions_app.models import LEDGER_TEXT_LIMIT, Branch, LedgerEntry, Message, Session, Turn
from sessions_app.services import message_append, session_create
from sessions_app.turns import turn_start
from tests.web.api.conftest import bearer_client

pytestmark = pytest.mark.django_db

LATEST = TIME_MAX - timedelta(microseconds=1)  # 2099-12-31 23:59:59.999999 UTC
EARLIEST = TIME_MIN
TRICKY = "<script>alert('x')</script> & \"quotes\" 🎉 \u202eright-to-left\u202c é ﷽ "
ZONES = ["UTC", "Pacific/Kiritimati", "Etc/GMT+12"]  # UTC+14 and UTC-12


def name(text: str = TRICKY) -> str:
    """A name exactly at the length limit, full of what templates must escape."""
    value = (text * NAME_MAX_LENGTH)[: NAME_MAX_LENGTH - 1] + "x"
    assert clean_name(value, what="session") == value
    return value


def full_json(limit: int) -> dict:
    """A JSON object nested JSON_MAX_DEPTH levels deep, exactly `limit` bytes long."""
    leaf: dict = {"text": ""}
    value: dict = leaf
    for _ in range(JSON_MAX_DEPTH - 1):
        value = {"a": value}
    leaf["text"] = TRICKY
    while json_size(value) + len(TRICKY.encode()) <= limit:
        leaf["text"] += TRICKY
    leaf["text"] += "x" * (limit - json_size(value))
    assert json_size(value) == limit
    return value


@pytest.fixture
def extreme(alice, settings):
    """Alice's sessions with every stored value at the edge of what is allowed."""
    metadata = full_json(settings.ROLLBACK_METADATA_MAX_BYTES)
    state = full_json(settings.ROLLBACK_STATE_MAX_BYTES)
    assert clean_metadata(metadata, what="metadata") == metadata
    assert clean_session_state(state) == state
    sessions = []
    for when in (EARLIEST, LATEST):
        session = session_create(owner=alice, name="placeholder")
        turn = turn_start(session=session, message="hello")
        branch = Branch.objects.get(session=session)
        Session.objects.filter(pk=session.pk).update(
            session_name=name(),
            metadata=metadata,
            created_at=when,
            updated_at=when,
            archived_at=when,
        )
        Branch.objects.filter(pk=branch.pk).update(
            created_at=when, session_state=state, metadata=metadata
        )
        Message.objects.filter(branch=branch).update(
            created_at=when,
            # A user's message at the most one may be (AGENT_MAX_INPUT_CHARS), imports included.
            content=(TRICKY * 1000)[: settings.AGENT_MAX_INPUT_CHARS],
            tool_name=name(),
            tool_args=metadata,
            tool_calls=[metadata["a"]],  # a list around 31 levels: 32 in all
            metadata=metadata,
        )
        reply = message_append(branch=branch, role="assistant", content=TRICKY, metadata=metadata)
        Message.objects.filter(pk=reply.pk).update(created_at=when)
        Turn.objects.filter(pk=turn.pk).update(
            status=Turn.Status.DONE,
            created_at=when,
            started_at=when,
            heartbeat_at=when,
            finished_at=when,
            reply_message=reply,
            metadata=metadata,
        )
        Checkpoint.objects.create(
            branch=branch,
            checkpoint_name=name(),
            description=TRICKY * 100,
            message_count=1,
            session_state=state,
            metadata=metadata,
            created_at=when,
        )
        Branch.objects.filter(pk=branch.pk).update(checkpoint_count=1)
        # An entry of the effects ledger at its limits (LEDGER_TEXT_LIMIT), naming a message that
        # is not a tool message (no turn writes one: export leaves the reference out).
        LedgerEntry.objects.create(
            session=session,
            user=alice,
            branch_ref=branch.pk,
            turn_ref=turn.pk,
            message_ref=reply.pk,
            position=1,
            tool_name=name(),
            tool_args=full_json(LEDGER_TEXT_LIMIT),
            tool_result=(TRICKY * 1000)[:LEDGER_TEXT_LIMIT],
            status=LedgerEntry.Status.MAY_HAVE_RUN,
            created_at=when,
        )
        sessions.append(Session.objects.get(pk=session.pk))
    return sessions


def _chat_pages(session: Session) -> list[str]:
    branch = Branch.objects.get(session=session)
    checkpoint = Checkpoint.objects.get(branch=branch)
    return [
        reverse("chat:home"),
        reverse("chat:session", args=[session.pk]),
        reverse("chat:session_list") + "?q=script",
        reverse("chat:earlier", args=[session.pk]) + "?before=1",
        reverse("chat:refresh", args=[session.pk]),
        reverse("chat:export", args=[session.pk]),
        reverse("chat:checkpoint_detail", args=[checkpoint.pk]),
        reverse("chat:checkpoint_restore", args=[checkpoint.pk]),
    ]


def _api_pages(session: Session) -> list[str]:
    branch = Branch.objects.get(session=session)
    checkpoint = Checkpoint.objects.get(branch=branch)
    turn = Turn.objects.get(session=session)
    return [
        "/api/v1/sessions/",
        "/api/v1/sessions/?q=script",
        f"/api/v1/sessions/{session.pk}/",
        f"/api/v1/sessions/{session.pk}/messages/",
        f"/api/v1/sessions/{session.pk}/branches/",
        f"/api/v1/sessions/{session.pk}/effects/",
        f"/api/v1/sessions/{session.pk}/checkpoints/",
        f"/api/v1/sessions/{session.pk}/export/",
        f"/api/v1/checkpoints/{checkpoint.pk}/",
        f"/api/v1/turns/{turn.pk}/",
    ]


def _admin_pages(session: Session) -> list[str]:
    branch = Branch.objects.get(session=session)
    objects = [
        session,
        branch,
        *Message.objects.filter(branch=branch),
        Checkpoint.objects.get(branch=branch),
        session.owner,
    ]
    changes = [
        reverse(f"admin:{o._meta.app_label}_{o._meta.model_name}_change", args=[o.pk])
        for o in objects
    ]
    sessions = reverse("admin:sessions_app_session_changelist")
    return [
        sessions,
        f"{sessions}?created_at__year={session.created_at.year}",
        f"{sessions}?created_at__year={session.created_at.year}&created_at__month=12",
        f"{sessions}?q=script",
        reverse("admin:sessions_app_branch_changelist"),
        reverse("admin:sessions_app_message_changelist"),
        reverse("admin:checkpoints_checkpoint_changelist"),
        reverse("admin:checkpoints_checkpoint_changelist")
        + "?"
        + urlencode({"created_at__gte": f"{session.created_at.year}-01-01 00:00:00+00:00"}),
        reverse("admin:accounts_user_changelist"),
        *changes,
    ]


@pytest.mark.parametrize("zone", ZONES)
def test_every_chat_page_answers_200_with_values_at_their_limits(client, alice, extreme, zone):
    client.force_login(alice)
    with timezone.override(ZoneInfo(zone)):
        for session in extreme:
            for url in _chat_pages(session):
                response = client.get(url, follow=True, HTTP_HX_REQUEST="true")
                assert response.status_code == 200, url


@pytest.mark.parametrize("zone", ZONES)
def test_every_api_answer_is_200_with_values_at_their_limits(alice, extreme, zone):
    api = bearer_client(alice)
    with timezone.override(ZoneInfo(zone)):
        for session in extreme:
            for url in _api_pages(session):
                assert api.get(url).status_code == 200, url
    listing = api.get("/api/v1/sessions/?archived=true").json()["results"]  # both archived
    assert sorted(s["created_at"] for s in listing) == [
        "1970-01-01T00:00:00Z",
        "2099-12-31T23:59:59.999999Z",
    ]


@pytest.mark.parametrize("zone", ZONES)
def test_every_admin_list_and_page_answers_200_with_values_at_their_limits(
    client, admin_user, extreme, zone
):
    client.force_login(admin_user)
    with timezone.override(ZoneInfo(zone)):
        for session in extreme:
            for url in _admin_pages(session):
                assert client.get(url).status_code == 200, url


def test_an_exported_extreme_session_imports_again(alice, extreme):
    """Values at the limits pass import's checks too (but for a time in the future)."""
    api = bearer_client(alice)
    document = api.get(f"/api/v1/sessions/{extreme[0].pk}/export/").json()
    response = api.post("/api/v1/sessions/import/", document, format="json")
    assert response.status_code == 201, response.json()
    (entry,) = LedgerEntry.objects.filter(session_id=response.json()["id"])
    assert (entry.tool_name, entry.tool_args, entry.tool_result) == (
        document["effects"][0]["tool_name"],
        document["effects"][0]["tool_args"],
        document["effects"][0]["tool_result"],
    )


# --- the database refuses what Python could not read back -------------------------------------


def _time_columns() -> list[tuple[type[models.Model], str]]:
    """Every time column of the models a user's actions write to."""
    return [
        (model, field.name)
        for model in (Session, Branch, Message, Turn, Checkpoint)
        for field in model._meta.get_fields()
        if isinstance(field, models.DateTimeField)
    ]


@pytest.fixture
def one_of_each(alice):
    session = session_create(owner=alice, name="s")
    turn = turn_start(session=session, message="hi")
    branch = Branch.objects.get(session=session)
    checkpoint = Checkpoint.objects.create(branch=branch, checkpoint_name="c", message_count=0)
    return {
        Session: session.pk,
        Branch: branch.pk,
        Message: Message.objects.get(branch=branch).pk,
        Turn: turn.pk,
        Checkpoint: checkpoint.pk,
    }


@pytest.mark.parametrize(
    ("model", "field"), _time_columns(), ids=[f"{m.__name__}.{f}" for m, f in _time_columns()]
)
@pytest.mark.parametrize(
    "when",
    [TIME_MAX, TIME_MIN - timedelta(microseconds=1), datetime(9999, 12, 31, 23, 59, tzinfo=UTC)],
    ids=["2100", "1969", "9999"],
)
def test_the_database_refuses_a_time_outside_1970_to_2099(one_of_each, model, field, when):
    rows = model.objects.filter(pk=one_of_each[model])
    with pytest.raises(IntegrityError), transaction.atomic():
        rows.update(**{field: when})
    assert rows.update(**{field: LATEST}) == 1
    assert rows.update(**{field: EARLIEST}) == 1
