from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from checkpoints.models import Checkpoint
from checkpoints.services import checkpoint_create, checkpoint_restore
from sessions_app.models import Branch, LedgerEntry, Message, Session
from sessions_app.services import session_create
from tests.conftest import grow, say

pytestmark = pytest.mark.django_db

User = get_user_model()

CHANGELISTS = {
    "users": "admin:accounts_user_changelist",
    "sessions": "admin:sessions_app_session_changelist",
    "branches": "admin:sessions_app_branch_changelist",
    "checkpoints": "admin:checkpoints_checkpoint_changelist",
    "messages": "admin:sessions_app_message_changelist",
    "effects ledger": "admin:sessions_app_ledgerentry_changelist",
}


def current(session: Session) -> Branch:
    return Branch.objects.get(session=session, is_current=True)


def build(n: int, start: int = 0) -> None:
    """n users, each with a session of two branches (one restored from a checkpoint), two
    checkpoints (one manual, one automatic), messages in both branches and an external call."""
    for i in range(start, start + n):
        owner = User.objects.create(username=f"user{i}")  # no password: hashing is slow
        session = session_create(owner=owner, name=f"session {i}")
        branch = current(session)
        say(branch, f"question {i}", f"answer {i}")
        checkpoint = checkpoint_create(branch=branch, name=f"cp {i}")
        checkpoint_create(branch=branch, name=f"auto {i}", is_auto=True)
        restored = checkpoint_restore(checkpoint=checkpoint).branch
        say(restored, f"follow-up {i}")
        LedgerEntry.objects.create(
            session=session,
            user=owner,
            branch_ref=restored.pk,
            position=2,
            tool_name=f"tool {i}",
            status=LedgerEntry.Status.RAN,
        )


def changelist(client, name: str, query: str = ""):
    return client.get(reverse(CHANGELISTS[name]) + query)


@pytest.fixture
def admin_client_(client, admin_user):
    client.force_login(admin_user)
    return client


# --- access -----------------------------------------------------------------------------------


@pytest.mark.parametrize("name", CHANGELISTS)
def test_every_changelist_answers_200_for_the_admin(admin_client_, name):
    build(2)
    assert changelist(admin_client_, name).status_code == 200


def test_every_change_page_answers_200_for_the_admin(admin_client_, alice, session, branch):
    say(branch, "hello", "hi")
    checkpoint = checkpoint_create(branch=branch, name="cp")
    objects = [alice, session, branch, checkpoint, Message.objects.first()]
    for obj in objects:
        opts = obj._meta
        url = reverse(f"admin:{opts.app_label}_{opts.model_name}_change", args=[obj.pk])
        assert admin_client_.get(url).status_code == 200, url


@pytest.mark.parametrize("name", CHANGELISTS)
def test_non_staff_user_is_redirected_to_the_login_page(client, alice, name):
    client.force_login(alice)
    response = changelist(client, name)
    assert response.status_code == 302
    assert response["Location"].startswith(reverse("admin:login"))


def test_anonymous_visitor_is_redirected_to_the_login_page(client, branch):
    url = reverse("admin:sessions_app_branch_change", args=[branch.pk])
    response = client.get(url)
    assert response.status_code == 302
    assert response["Location"].startswith(reverse("admin:login"))


# --- no N+1 -----------------------------------------------------------------------------------


@pytest.mark.parametrize("name", CHANGELISTS)
def test_changelist_query_count_is_the_same_for_3_and_30_rows(admin_client_, name):
    build(3)
    changelist(admin_client_, name)  # warm up: session, content types, ...
    with CaptureQueriesContext(connection) as few:
        response = changelist(admin_client_, name)
    assert len(response.context["cl"].result_list) >= 3

    build(27, start=3)
    with CaptureQueriesContext(connection) as many:
        response = changelist(admin_client_, name)
    assert len(response.context["cl"].result_list) >= 30

    assert len(many) == len(few), [q["sql"] for q in many.captured_queries]


def test_change_pages_query_count_is_the_same_for_3_and_30_inline_rows(admin_client_, session):
    branch = current(session)
    say(branch, "q", "a")

    def grow_to(n):
        while Checkpoint.objects.count() < n:
            checkpoint = checkpoint_create(branch=branch, name="cp")
            checkpoint_restore(checkpoint=checkpoint)  # one more branch, with a parent

    pages = [
        reverse("admin:sessions_app_session_change", args=[session.pk]),
        reverse("admin:sessions_app_branch_change", args=[branch.pk]),
    ]
    grow_to(3)
    for url in pages:
        admin_client_.get(url)  # warm up
    counts = []
    for size in (3, 30):
        grow_to(size)
        for url in pages:
            with CaptureQueriesContext(connection) as queries:
                assert admin_client_.get(url).status_code == 200
            counts.append(len(queries))
    assert counts[:2] == counts[2:]


# --- users ------------------------------------------------------------------------------------


def test_user_list_counts_sessions_branches_and_checkpoints_without_multiplying(
    admin_client_, alice, bob, session, branch
):
    # alice: 2 sessions, 3 branches (one restored), 4 checkpoints; bob: 1, 1, 1.
    second = session_create(owner=alice, name="Second")
    say(branch, "q", "a")
    first_cp = checkpoint_create(branch=branch, name="one")
    checkpoint_create(branch=branch, name="two", is_auto=True)
    restored = checkpoint_restore(checkpoint=first_cp).branch
    checkpoint_create(branch=restored, name="three")
    checkpoint_create(branch=current(second), name="four")
    checkpoint_create(branch=current(session_create(owner=bob)), name="bob's")

    response = changelist(admin_client_, "users")
    rows = {user.username: user for user in response.context["cl"].result_list}
    counts = {
        name: (rows[name].session_count, rows[name].branch_count, rows[name].checkpoint_count)
        for name in ("alice", "bob", "admin")
    }
    assert counts == {"alice": (2, 3, 4), "bob": (1, 1, 1), "admin": (0, 0, 0)}
    assert f"?owner={alice.pk}" in response.content.decode()


def test_user_list_sorts_by_session_count(admin_client_, alice, bob):
    for _ in range(3):
        session_create(owner=bob)
    session_create(owner=alice)
    column = changelist(admin_client_, "users").context["cl"].list_display.index("session_count")
    response = changelist(admin_client_, "users", f"?o=-{column}")
    assert [u.username for u in response.context["cl"].result_list] == ["bob", "alice", "admin"]


def test_user_change_page_has_the_metadata_field(admin_client_, alice):
    url = reverse("admin:accounts_user_change", args=[alice.pk])
    assert 'name="metadata"' in admin_client_.get(url).content.decode()


def test_user_delete_page_summarises_instead_of_listing_every_message(admin_client_, alice, branch):
    grow(branch, 500)
    url = reverse("admin:accounts_user_delete", args=[alice.pk])
    with CaptureQueriesContext(connection) as queries:
        response = admin_client_.get(url)
    assert response.status_code == 200
    assert "message 499" not in response.content.decode()
    assert dict(response.context["model_count"])["messages"] == 500
    assert not response.context["perms_lacking"]
    assert len(queries) < 30

    assert admin_client_.post(url, {"post": "yes"}).status_code == 302
    assert not User.objects.filter(pk=alice.pk).exists()
    assert not Message.objects.exists()


# --- sessions ---------------------------------------------------------------------------------


def test_session_list_shows_branch_count_and_filters_by_owner(admin_client_, alice, bob, session):
    checkpoint_restore(checkpoint=checkpoint_create(branch=current(session), name="cp"))
    session_create(owner=bob, name="Bob's")

    response = changelist(admin_client_, "sessions", f"?owner={alice.pk}")
    rows = list(response.context["cl"].result_list)
    assert [(s.session_name, s.branch_count) for s in rows] == [("Python basics", 2)]


def test_session_list_search_by_name(admin_client_, session, bob):
    session_create(owner=bob, name="Cooking")
    response = changelist(admin_client_, "sessions", "?q=python")
    assert [s.pk for s in response.context["cl"].result_list] == [session.pk]


def test_session_cannot_be_added_in_the_admin(admin_client_):
    assert admin_client_.get(reverse("admin:sessions_app_session_add")).status_code == 403


def test_saving_a_session_with_a_model_not_allowed_shows_the_error_and_keeps_it(
    admin_client_, session, settings
):
    settings.AGENT_MODEL, settings.AGENT_ALLOWED_MODELS = "house-model", []
    url = reverse("admin:sessions_app_session_change", args=[session.pk])
    form = {
        "session_name": "Renamed",
        "metadata": '{"settings": {"model": "o1-pro"}}',
        "archived_at_0": "",
        "archived_at_1": "",
        "branches-TOTAL_FORMS": "0",
        "branches-INITIAL_FORMS": "0",
    }
    response = admin_client_.post(url, form)
    assert response.status_code == 200
    assert "&#x27;o1-pro&#x27; is not allowed here" in response.content.decode()
    session.refresh_from_db()
    assert (session.session_name, session.metadata) == ("Python basics", {})
    form["metadata"] = '{"settings": {"model": "house-model"}}'
    assert admin_client_.post(url, form).status_code == 302
    session.refresh_from_db()
    assert session.metadata == {"settings": {"model": "house-model"}}


def test_session_change_page_lists_its_branches_read_only_with_links(
    admin_client_, session, branch
):
    restored = checkpoint_restore(checkpoint=checkpoint_create(branch=branch, name="cp")).branch
    url = reverse("admin:sessions_app_session_change", args=[session.pk])
    response = admin_client_.get(url)
    body = response.content.decode()
    for b in (branch, restored):
        assert reverse("admin:sessions_app_branch_change", args=[b.pk]) in body
    assert 'name="branches-0-fork_position"' not in body
    (inline,) = response.context["inline_admin_formsets"]
    assert not (inline.has_add_permission)
    assert not (inline.has_change_permission)
    assert not (inline.has_delete_permission)


def test_session_name_can_be_edited(admin_client_, alice, session):
    url = reverse("admin:sessions_app_session_change", args=[session.pk])
    page = admin_client_.get(url)
    data = {
        "owner": alice.pk,
        "session_name": "Renamed",
        "metadata": "{}",
        "archived_at_0": "",
        "archived_at_1": "",
    }
    formset = page.context["inline_admin_formsets"][0].formset
    for key, value in formset.management_form.initial.items():
        data[f"{formset.prefix}-{key}"] = value
    response = admin_client_.post(url, data)
    assert response.status_code == 302, response.context["adminform"].form.errors
    session.refresh_from_db()
    assert session.session_name == "Renamed"
    assert Branch.objects.filter(session=session, is_current=True).count() == 1


def _session_form_post(client, session, **fields):
    url = reverse("admin:sessions_app_session_change", args=[session.pk])
    page = client.get(url)
    data = {
        "owner": session.owner_id,
        "session_name": session.session_name,
        "metadata": "{}",
        "archived_at_0": "",
        "archived_at_1": "",
        **fields,
    }
    formset = page.context["inline_admin_formsets"][0].formset
    for key, value in formset.management_form.initial.items():
        data[f"{formset.prefix}-{key}"] = value
    return client.post(url, data)


@pytest.mark.parametrize(
    ("fields", "says"),
    [
        ({"archived_at_0": "2100-01-01", "archived_at_1": "00:00:00"}, "must lie between 1970"),
        ({"archived_at_0": "1969-12-31", "archived_at_1": "23:59:59"}, "must lie between 1970"),
        ({"metadata": "[" * 100_000 + "]" * 100_000}, "nested more than 32 levels deep"),
        ({"metadata": '{"a": "\\u0000"}'}, "cannot contain NUL characters"),
        ({"metadata": '{"blob": "%s"}' % ("x" * 70_000)}, "the limit is 65536 bytes"),
    ],
)
def test_session_form_refuses_what_would_break_a_page(admin_client_, session, fields, says):
    response = _session_form_post(admin_client_, session, session_name="Renamed", **fields)
    assert response.status_code == 200
    assert says in str(response.context["adminform"].form.errors)
    session.refresh_from_db()
    assert session.session_name == "Python basics"
    assert session.archived_at is None


def test_session_form_accepts_the_edges_of_the_time_range(admin_client_, session):
    fields = {"archived_at_0": "2099-12-31", "archived_at_1": "23:59:59"}
    response = _session_form_post(admin_client_, session, **fields)
    assert response.status_code == 302
    session.refresh_from_db()
    assert session.archived_at.isoformat() == "2099-12-31T23:59:59+00:00"


@pytest.mark.parametrize(
    ("fields", "says"),
    [
        ({"session_state": '{"blob": "%s"}' % ("x" * 70_000)}, "limit is 65536"),
        ({"session_state": '{"a":' * 50_000 + "1" + "}" * 50_000}, "nested more than 32"),
        ({"metadata": '{"a": "\\ud800"}'}, "lone surrogates"),
    ],
)
def test_branch_form_refuses_what_would_break_a_page(admin_client_, branch, fields, says):
    url = reverse("admin:sessions_app_branch_change", args=[branch.pk])
    data = {"session_state": "{}", "metadata": "{}", **fields}
    data.update({"checkpoints-TOTAL_FORMS": "0", "checkpoints-INITIAL_FORMS": "0"})
    response = admin_client_.post(url, data)
    assert response.status_code == 200
    assert says in str(response.context["adminform"].form.errors)
    branch.refresh_from_db()
    assert branch.session_state == {}
    assert branch.metadata == {}


def test_session_delete_takes_its_branches_messages_and_checkpoints(admin_client_, session, branch):
    say(branch, "q", "a")
    checkpoint_create(branch=branch, name="cp")
    url = reverse("admin:sessions_app_session_delete", args=[session.pk])
    response = admin_client_.get(url)
    assert response.status_code == 200
    assert dict(response.context["model_count"]) == {
        "sessions": 1,
        "branches": 1,
        "messages": 2,
        "checkpoints": 1,
    }
    assert admin_client_.post(url, {"post": "yes"}).status_code == 302
    assert not (Session.objects.exists())
    assert not (Message.objects.exists())
    assert not (Checkpoint.objects.exists())


# --- branches ---------------------------------------------------------------------------------


def test_branch_page_shows_last_messages_with_inherited_ones_escaped(admin_client_, branch):
    say(branch, "first question", "<script>alert(1)</script>")
    checkpoint = checkpoint_create(branch=branch, name="cp")
    restored = checkpoint_restore(checkpoint=checkpoint).branch
    say(restored, "follow-up")

    url = reverse("admin:sessions_app_branch_change", args=[restored.pk])
    body = admin_client_.get(url).content.decode()
    assert "first question" in body  # inherited from the parent branch
    assert f"branch {branch.pk}</td>" in body
    assert "follow-up" in body
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in body
    assert "<script>alert(1)</script>" not in body
    messages_url = reverse("admin:sessions_app_message_changelist")
    assert f"{messages_url}?branch__id__exact={restored.pk}" in body


def test_branch_page_with_10000_messages_shows_only_the_last_50(admin_client_, branch):
    grow(branch, 10_000)
    url = reverse("admin:sessions_app_branch_change", args=[branch.pk])
    with CaptureQueriesContext(connection) as queries:
        response = admin_client_.get(url)
    assert response.status_code == 200
    body = response.content.decode()
    assert ">message 9999</td>" in body
    assert ">message 9950</td>" in body
    assert ">message 9949</td>" not in body
    assert len(queries) < 30


def test_branch_structure_is_read_only_and_branches_cannot_be_added(admin_client_, branch):
    url = reverse("admin:sessions_app_branch_change", args=[branch.pk])
    form = admin_client_.get(url).context["adminform"].form
    assert set(form.fields) == {"session_state", "metadata"}
    assert admin_client_.get(reverse("admin:sessions_app_branch_add")).status_code == 403


def test_message_changelist_filtered_to_a_branch(admin_client_, session, branch):
    say(branch, "q", "a")
    other = current(session_create(owner=session.owner))
    say(other, "elsewhere")
    response = changelist(admin_client_, "messages", f"?branch__id__exact={branch.pk}")
    assert [m.content for m in response.context["cl"].result_list] == ["q", "a"]


# --- checkpoints ------------------------------------------------------------------------------


def test_checkpoint_kind_filter_lists_only_that_kind(admin_client_, branch):
    checkpoint_create(branch=branch, name="mine")
    checkpoint_create(branch=branch, name="auto-1", is_auto=True)
    checkpoint_create(branch=branch, name="auto-2", is_auto=True)

    def names(query):
        response = changelist(admin_client_, "checkpoints", query)
        return sorted(cp.checkpoint_name for cp in response.context["cl"].result_list)

    assert names("?kind=manual") == ["mine"]
    assert names("?kind=auto") == ["auto-1", "auto-2"]
    assert names("") == ["auto-1", "auto-2", "mine"]


def test_delete_action_deletes_checkpoints_and_keeps_branch_count_right(admin_client_, branch):
    say(branch, "q", "a")
    doomed = [checkpoint_create(branch=branch, name=f"cp {i}") for i in range(2)]
    kept = checkpoint_create(branch=branch, name="kept")
    messages_before = Message.objects.count()

    response = admin_client_.post(
        reverse(CHANGELISTS["checkpoints"]),
        {"action": "delete_checkpoints", "_selected_action": [cp.pk for cp in doomed]},
        follow=True,
    )
    assert response.status_code == 200
    assert "Deleted 2 checkpoints." in [str(m) for m in response.context["messages"]]
    assert list(Checkpoint.objects.values_list("pk", flat=True)) == [kept.pk]
    branch.refresh_from_db()
    assert branch.checkpoint_count == 1
    assert Message.objects.count() == messages_before


def test_checkpoint_admin_offers_no_stock_bulk_delete(admin_client_, branch):
    checkpoint_create(branch=branch, name="cp")
    response = changelist(admin_client_, "checkpoints")
    actions = dict(response.context["action_form"].fields["action"].choices)
    assert "delete_selected" not in actions
    assert actions["delete_checkpoints"] == "Delete selected checkpoints"


def test_checkpoint_delete_page_goes_through_the_service(admin_client_, branch):
    checkpoint = checkpoint_create(branch=branch, name="cp")
    checkpoint_create(branch=branch, name="other")
    url = reverse("admin:checkpoints_checkpoint_delete", args=[checkpoint.pk])
    assert admin_client_.post(url, {"post": "yes"}).status_code == 302
    assert not Checkpoint.objects.filter(pk=checkpoint.pk).exists()
    branch.refresh_from_db()
    assert branch.checkpoint_count == 1


def test_checkpoint_name_and_description_are_the_only_editable_fields(admin_client_, branch):
    checkpoint = checkpoint_create(branch=branch, name="cp")
    url = reverse("admin:checkpoints_checkpoint_change", args=[checkpoint.pk])
    assert set(admin_client_.get(url).context["adminform"].form.fields) == {
        "checkpoint_name",
        "description",
    }
    response = admin_client_.post(url, {"checkpoint_name": "  renamed ", "description": "d"})
    assert response.status_code == 302
    checkpoint.refresh_from_db()
    assert (checkpoint.checkpoint_name, checkpoint.description) == ("renamed", "d")
    assert admin_client_.get(reverse("admin:checkpoints_checkpoint_add")).status_code == 403


# --- messages ---------------------------------------------------------------------------------


def test_message_admin_refuses_change_and_has_no_add(admin_client_, branch):
    say(branch, "original")
    message = Message.objects.get()
    url = reverse("admin:sessions_app_message_change", args=[message.pk])
    assert admin_client_.get(url).status_code == 200  # view only
    response = admin_client_.post(url, {"content": "edited", "role": "user", "position": 0})
    assert response.status_code == 403
    message.refresh_from_db()
    assert message.content == "original"
    assert admin_client_.get(reverse("admin:sessions_app_message_add")).status_code == 403
    delete_url = reverse("admin:sessions_app_message_delete", args=[message.pk])
    assert admin_client_.post(delete_url, {"post": "yes"}).status_code == 403
    assert Message.objects.filter(pk=message.pk).exists()
    assert not changelist(admin_client_, "messages").context["has_add_permission"]


def test_the_turn_page_shows_operators_the_model_server_and_summaries_are_listed(
    admin_client_, session, branch, settings
):
    from sessions_app.services import summary_store
    from sessions_app.turns import turn_fail, turn_start

    settings.OPENAI_BASE_URL = "http://models.internal:8001/v1"
    turn = turn_start(session=session, message="hi")
    turn_fail(turn=turn, error="the model server answered HTTP 500")
    page = admin_client_.get(reverse("admin:sessions_app_turn_change", args=[turn.pk]))
    assert page.status_code == 200
    assert "http://models.internal:8001/v1" in page.content.decode()
    assert admin_client_.get(reverse("admin:sessions_app_turn_changelist")).status_code == 200

    say(branch, "hello", "hi")
    summary = summary_store(branch=branch, end=2, content="They greeted.", model="m")
    listed = admin_client_.get(reverse("admin:sessions_app_summary_changelist"))
    assert listed.status_code == 200
    page = admin_client_.get(reverse("admin:sessions_app_summary_change", args=[summary.pk]))
    assert "They greeted." in page.content.decode()
    # Read-only: rows the services write.
    assert (
        admin_client_.post(
            reverse("admin:sessions_app_turn_delete", args=[turn.pk]), {"post": "yes"}
        ).status_code
        == 403
    )


def test_sessions_are_listed_searched_and_filtered_by_key(admin_client_, alice):
    from sessions_app.services import session_for_key

    keyed = session_for_key(owner=alice, session_key="agent:shket:per-peer:98765")
    plain = session_create(owner=alice, name="no key here")
    url = reverse(CHANGELISTS["sessions"])
    listing = admin_client_.get(url).content.decode()
    assert "agent:shket:per-peer:98765" in listing
    found = admin_client_.get(url, {"q": "per-peer:987"}).context["cl"].result_list
    assert [s.pk for s in found] == [keyed.pk]
    with_key = admin_client_.get(url, {"session_key__isempty": "0"}).context["cl"].result_list
    without = admin_client_.get(url, {"session_key__isempty": "1"}).context["cl"].result_list
    assert [s.pk for s in with_key] == [keyed.pk]
    assert [s.pk for s in without] == [plain.pk]
    change = admin_client_.get(
        reverse("admin:sessions_app_session_change", args=[keyed.pk])
    ).content.decode()
    assert "agent:shket:per-peer:98765" in change
    assert 'name="session_key"' not in change
