"""Who gets which MCP server (agents.mcp.access): for everyone, for chosen users or groups, or
chosen per session; each user's own credentials, sent in their turns only, stored encrypted;
a server whose credentials a user has not given is left out of their turn with a notice. Real
turns against a real MCP server (tests.fakes.mcp_server) that refuses any request without the
right bearer token, and the local model server."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Group
from django.db import connection

from agents.mcp.access import (
    get_server_for_user,
    headers_for,
    servers_for,
    session_server_choose,
)
from agents.mcp.credentials import mcp_credentials_set
from agents.models import McpCredential, McpServer
from core.events import listen
from core.sealed import PREFIX
from sessions_app.services import session_create
from tests.conftest import ask
from tests.fakes.chat_server import Reply, ToolCall, ToolCalls
from tests.fakes.mcp_server import FakeMcpServer

pytestmark = pytest.mark.django_db

ALICE_TOKEN = "alice-own-token-4f1c9e"  # noqa: S105 - a test's secret
OPERATOR_TOKEN = "operator-token-77ab2d"  # noqa: S105 - a test's secret


@pytest.fixture(scope="module")
def alice_server():
    """A server that answers only alice's own token."""
    with FakeMcpServer(token=ALICE_TOKEN).start() as server:
        yield server


def names(servers) -> list[str]:
    return sorted(s.name for s in servers)


def raw_column(model, pk: int) -> str:
    table = connection.ops.quote_name(model._meta.db_table)
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT headers FROM {table} WHERE id = %s", [pk])  # noqa: S608
        return cursor.fetchone()[0]


def offered(request: dict) -> set[str]:
    return {t["function"]["name"] for t in request.get("tools", [])}


def test_each_user_gets_the_servers_for_everyone_for_them_and_for_their_groups(alice, bob):
    team = Group.objects.create(name="team")
    bob.groups.add(team)
    McpServer.objects.create(name="open", url="http://127.0.0.1:9/mcp")
    mine = McpServer.objects.create(name="mine", url="http://127.0.0.1:9/mcp", for_everyone=False)
    mine.users.add(alice)
    teams = McpServer.objects.create(name="teams", url="http://127.0.0.1:9/mcp", for_everyone=False)
    teams.groups.add(team)
    McpServer.objects.create(name="nobody", url="http://127.0.0.1:9/mcp", for_everyone=False)
    McpServer.objects.create(name="off", url="http://127.0.0.1:9/mcp", enabled=False)

    alice_session = session_create(owner=alice, name="a")
    bob_session = session_create(owner=bob, name="b")
    assert names(servers_for(alice, alice_session).servers) == ["mine", "open"]
    assert names(servers_for(bob, bob_session).servers) == ["open", "teams"]
    # A server bob may not use is not found for him, whatever its name.
    with pytest.raises(Exception, match="No such MCP server"):
        get_server_for_user(bob, "mine")
    # A user in both ways gets it once.
    mine.users.add(bob)
    mine.groups.add(team)
    assert names(servers_for(bob, bob_session).servers) == ["mine", "open", "teams"]


@pytest.mark.django_db(transaction=True)  # the event is sent after commit
def test_a_per_session_server_is_off_until_turned_on_in_that_session_only(alice):
    server = McpServer.objects.create(name="git", url="http://127.0.0.1:9/mcp", per_session=True)
    McpServer.objects.create(name="time", url="http://127.0.0.1:9/mcp")
    first = session_create(owner=alice, name="first")
    second = session_create(owner=alice, name="second")
    assert names(servers_for(alice, first).servers) == ["time"]

    heard: list[dict] = []
    stop = listen(first.pk, heard.append)
    try:
        session_server_choose(session=first, server=server, on=True)
    finally:
        stop()
    first.refresh_from_db()
    assert first.settings["mcp_servers"] == {"git": True}
    assert names(servers_for(alice, first).servers) == ["git", "time"]
    assert names(servers_for(alice, second).servers) == ["time"]
    # Announced like every setting: the other tabs hear it.
    assert [e["type"] for e in heard] == ["session.changed"]
    assert heard[0]["metadata"]["settings"]["mcp_servers"] == {"git": True}

    # A server on by default is turned off the same way; other settings stay.
    time = McpServer.objects.get(name="time")
    session_server_choose(session=first, server=time, on=False)
    first.refresh_from_db()
    assert names(servers_for(alice, first).servers) == ["git"]


def test_a_session_choice_never_grants_a_server_the_user_may_not_use(alice):
    McpServer.objects.create(name="secret", url="http://127.0.0.1:9/mcp", for_everyone=False)
    session = session_create(
        owner=alice, name="s", metadata={"settings": {"mcp_servers": {"secret": True}}}
    )
    assert servers_for(alice, session).servers == []


def test_headers_for_merges_the_operators_headers_with_the_users_own(alice, bob):
    server = McpServer.objects.create(
        name="tracker",
        url="http://127.0.0.1:9/mcp",
        headers={"X-Team": "operator-team-header", "Authorization": "Bearer operator"},
        user_headers=["Authorization"],
    )
    mcp_credentials_set(
        user=alice, server=server, headers={"Authorization": f"Bearer {ALICE_TOKEN}"}
    )
    assert headers_for(server, alice) == {
        "X-Team": "operator-team-header",
        "Authorization": f"Bearer {ALICE_TOKEN}",
    }
    # Bob has given nothing: his turns are not offered it (servers_for), and his headers are
    # never alice's.
    assert headers_for(server, bob)["Authorization"] == "Bearer operator"
    bob_session = session_create(owner=bob, name="b")
    chosen = servers_for(bob, bob_session)
    assert chosen.servers == []
    [notice] = chosen.notices
    assert "tracker" in notice
    assert "Authorization" in notice
    assert "profile" in notice


def test_header_values_and_credentials_are_encrypted_at_rest(alice):
    server = McpServer.objects.create(
        name="tracker",
        url="http://127.0.0.1:9/mcp",
        headers={"Authorization": f"Bearer {OPERATOR_TOKEN}"},
        user_headers=["X-Api-Key"],
    )
    mcp_credentials_set(user=alice, server=server, headers={"X-Api-Key": ALICE_TOKEN})

    stored = raw_column(McpServer, server.pk)
    assert stored.startswith(PREFIX)
    assert OPERATOR_TOKEN not in stored
    assert "Authorization" not in stored
    credential = McpCredential.objects.get(user=alice, server=server)
    stored = raw_column(McpCredential, credential.pk)
    assert stored.startswith(PREFIX)
    assert ALICE_TOKEN not in stored
    # Read back through the model: the plain values.
    assert McpServer.objects.get(pk=server.pk).headers == {
        "Authorization": f"Bearer {OPERATOR_TOKEN}"
    }
    assert McpCredential.objects.get(pk=credential.pk).headers == {"X-Api-Key": ALICE_TOKEN}


def test_a_value_sealed_with_a_key_no_longer_configured_reads_as_unset(alice, settings):
    server = McpServer.objects.create(
        name="tracker", url="http://127.0.0.1:9/mcp", user_headers=["X-Api-Key"]
    )
    mcp_credentials_set(user=alice, server=server, headers={"X-Api-Key": ALICE_TOKEN})
    from cryptography.fernet import Fernet

    settings.ROLLBACK_ENCRYPTION_KEYS = [Fernet.generate_key().decode()]
    assert McpCredential.objects.get(user=alice).headers == {}
    session = session_create(owner=alice, name="s")
    assert servers_for(alice, session).servers == []  # needs credentials again


def test_a_rotated_key_still_opens_old_values_and_reseal_moves_them_to_the_new_key(alice, settings):
    from cryptography.fernet import Fernet
    from django.core.management import call_command

    old, new = Fernet.generate_key().decode(), Fernet.generate_key().decode()
    settings.ROLLBACK_ENCRYPTION_KEYS = [old]
    server = McpServer.objects.create(
        name="tracker", url="http://127.0.0.1:9/mcp", headers={"X-Key": OPERATOR_TOKEN}
    )
    settings.ROLLBACK_ENCRYPTION_KEYS = [new, old]
    assert McpServer.objects.get(pk=server.pk).headers == {"X-Key": OPERATOR_TOKEN}
    call_command("reseal", stdout=open("/dev/null", "w"))  # noqa: SIM115
    settings.ROLLBACK_ENCRYPTION_KEYS = [new]
    assert McpServer.objects.get(pk=server.pk).headers == {"X-Key": OPERATOR_TOKEN}


@pytest.mark.django_db(transaction=True)
def test_a_turn_sends_the_users_own_token_and_another_users_turn_gets_a_notice(
    fake_llm, alice, bob, alice_server, settings
):
    settings.AGENT_MCP_TIMEOUT = 10
    alice_server.reset()
    server = McpServer.objects.create(
        name="tracker", url=alice_server.url, user_headers=["Authorization"]
    )
    mcp_credentials_set(
        user=alice, server=server, headers={"Authorization": f"Bearer {ALICE_TOKEN}"}
    )

    alice_session = session_create(owner=alice, name="a")
    fake_llm.queue(ToolCalls([ToolCall("tracker__lookup", {"query": "rollback"})]), Reply("Done."))
    turn = ask(alice_session, "look it up")
    assert turn.status == "done"
    assert "tracker__lookup" in offered(fake_llm.requests[0])
    assert alice_server.calls == [("lookup", {"query": "rollback"})]
    assert f"Bearer {ALICE_TOKEN}" in alice_server.seen_authorization

    # Bob has given no credentials: his turn is not offered the server, goes on, and says so.
    alice_server.reset()
    fake_llm.reset()
    bob_session = session_create(owner=bob, name="b")
    fake_llm.queue(Reply("Hello."))
    turn = ask(bob_session, "hello")
    assert turn.status == "done"
    assert not any(n.startswith("tracker__") for n in offered(fake_llm.requests[0]))
    assert alice_server.seen_authorization == []  # not contacted at all
    [notice] = turn.metadata["notices"]
    assert "tracker" in notice
    assert "needs your own credentials" in notice


@pytest.mark.django_db(transaction=True)
def test_a_server_chosen_for_alice_is_never_offered_to_bob(fake_llm, alice, bob, settings):
    with FakeMcpServer(token=OPERATOR_TOKEN).start() as fs:
        server = McpServer.objects.create(
            name="files",
            url=fs.url,
            headers={"Authorization": f"Bearer {OPERATOR_TOKEN}"},
            for_everyone=False,
        )
        server.users.add(alice)
        fake_llm.queue(Reply("Hello."))
        turn = ask(session_create(owner=bob, name="b"), "read alice's notes")
        assert turn.status == "done"
        assert not any(n.startswith("files__") for n in offered(fake_llm.requests[0]))
        assert fs.seen_authorization == []
        assert "notices" not in turn.metadata

        fake_llm.reset()
        fake_llm.queue(Reply("Hello."))
        ask(session_create(owner=alice, name="a"), "hello")
        assert "files__lookup" in offered(fake_llm.requests[0])


@pytest.mark.django_db(transaction=True)
def test_an_erasure_deletes_the_users_own_credentials_and_keeps_everyone_elses(alice, bob):
    from ops.audit import Who
    from ops.erasure import user_erase

    server = McpServer.objects.create(
        name="tracker", url="http://127.0.0.1:9/mcp", user_headers=["X-Api-Key"]
    )
    mcp_credentials_set(user=alice, server=server, headers={"X-Api-Key": ALICE_TOKEN})
    mcp_credentials_set(user=bob, server=server, headers={"X-Api-Key": "bob-own-token-1234"})
    alice_id = alice.pk

    record = user_erase(user=alice, who=Who.command("tests"))

    assert record.details["rows"]["mcp_credentials"] == 1
    assert not McpCredential.objects.filter(user_id=alice_id).exists()
    assert McpCredential.objects.get(user=bob).headers == {"X-Api-Key": "bob-own-token-1234"}
    assert McpServer.objects.filter(pk=server.pk).exists()


@pytest.mark.django_db(transaction=True)  # SQLite's schema editor needs autocommit
def test_the_migration_encrypts_the_headers_already_stored():
    """agents 0002: rows written before it (plain JSON headers) come out sealed, same values."""
    from django.db.migrations.executor import MigrationExecutor

    before = [("agents", "0001_initial")]
    executor = MigrationExecutor(connection)
    executor.migrate(before)
    try:
        old = executor.loader.project_state(before).apps.get_model("agents", "McpServer")
        row = old.objects.create(
            name="legacy", url="http://127.0.0.1:9/mcp", headers={"X-Key": OPERATOR_TOKEN}
        )
        assert OPERATOR_TOKEN in raw_column(McpServer, row.pk)  # plain before
    finally:
        # Every migration applied again: the worker's later tests need today's schema.
        executor = MigrationExecutor(connection)
        executor.migrate(executor.loader.graph.leaf_nodes())
    assert OPERATOR_TOKEN not in raw_column(McpServer, row.pk)
    assert McpServer.objects.get(pk=row.pk).headers == {"X-Key": OPERATOR_TOKEN}


def test_a_dump_of_the_database_holds_the_sealed_values_and_loads_back(alice):
    """`dumpdata` (a backup) writes the token, never the value; `loaddata` reads it back."""
    import io
    import json

    from django.core import serializers

    server = McpServer.objects.create(
        name="tracker",
        url="http://127.0.0.1:9/mcp",
        headers={"Authorization": f"Bearer {OPERATOR_TOKEN}"},
        user_headers=["X-Api-Key"],
    )
    mcp_credentials_set(user=alice, server=server, headers={"X-Api-Key": ALICE_TOKEN})
    out = io.StringIO()
    from django.core.management import call_command

    call_command("dumpdata", "agents", stdout=out)
    dumped = out.getvalue()
    assert OPERATOR_TOKEN not in dumped
    assert ALICE_TOKEN not in dumped
    assert PREFIX in dumped

    McpCredential.objects.all().delete()
    McpServer.objects.all().delete()
    for item in serializers.deserialize("json", json.dumps(json.loads(dumped))):
        item.save()
    assert McpServer.objects.get(name="tracker").headers == {
        "Authorization": f"Bearer {OPERATOR_TOKEN}"
    }
    assert McpCredential.objects.get(user=alice).headers == {"X-Api-Key": ALICE_TOKEN}
