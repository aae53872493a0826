"""AGENT_MCP_SERVERS: checked at the start (a clear message naming the entry), written into the
admin's rows on first use, without wiping what the entry leaves out."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.core.exceptions import ImproperlyConfigured

from agents.mcp.config import configured_servers
from agents.mcp.services import forget_sync, mcp_servers_ensure
from agents.models import McpServer
from agents.turn.claim import (
    MCP_SERVERS_ENABLED,
    OWNER_HAS_MEMORIES,
    claim_may_find,
    claim_queued,
)
from sessions_app.turns import turn_fail, turn_start

SECRET = "Bearer config-secret-99"  # noqa: S105 - a test's secret


@pytest.fixture
def mcp_setting(settings):
    """Set AGENT_MCP_SERVERS (as the environment gives it: a JSON string)."""
    forget_sync()

    def put(value):
        settings.AGENT_MCP_SERVERS = value if isinstance(value, str) else json.dumps(value)

    yield put
    forget_sync()


def test_an_empty_setting_means_no_servers(mcp_setting):
    mcp_setting("")
    assert configured_servers() == []


def test_a_good_entry_is_read_with_what_it_leaves_out_as_none(mcp_setting):
    mcp_setting([{"name": "tracker", "url": "https://mcp.example.com/mcp"}])

    [entry] = configured_servers()

    assert (entry.name, entry.url) == ("tracker", "https://mcp.example.com/mcp")
    assert entry.headers is None
    assert entry.approval is None
    assert entry.enabled is None


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("[{not json", "AGENT_MCP_SERVERS is not valid JSON"),
        ('{"name": "x"}', "must be a JSON list"),
        (["tracker"], r"AGENT_MCP_SERVERS\[0\] must be an object"),
        ([{"name": "bad name", "url": "https://x.example"}], r"\[0\] \('bad name'\): the name"),
        ([{"url": "https://x.example"}], r"AGENT_MCP_SERVERS\[0\]: the name"),
        ([{"name": "ok", "url": "ftp://x.example"}], r"\[0\] \('ok'\): the url"),
        ([{"name": "ok", "url": "not a url"}], r"\[0\] \('ok'\): the url"),
        ([{"name": "ok", "url": "https://x.example", "headers": ["a"]}], "headers must be"),
        (
            [{"name": "ok", "url": "https://x.example", "headers": {"Authorization": 1}}],
            "header 'Authorization' must be a string",
        ),
        (
            [{"name": "ok", "url": "https://x.example", "approval": "drop"}],
            "approval must be a list",
        ),
        ([{"name": "ok", "url": "https://x.example", "enabled": "yes"}], "enabled must be"),
        ([{"name": "ok", "url": "https://x.example", "token": "t"}], "unknown keys token"),
        (
            [
                {"name": "a", "url": "https://x.example"},
                {"name": "b", "url": "https://y.example"},
                {"name": "a", "url": "https://z.example"},
            ],
            "names a more than once",
        ),
    ],
)
def test_a_bad_setting_stops_the_start_naming_the_entry(mcp_setting, value, message):
    mcp_setting(value)
    with pytest.raises(ImproperlyConfigured, match=message):
        configured_servers()


def test_a_bad_header_never_quotes_its_value(mcp_setting):
    entry = {"name": "ok", "url": "https://x.example", "headers": {"Authorization": SECRET + "\n"}}
    mcp_setting([entry])

    with pytest.raises(ImproperlyConfigured) as caught:
        configured_servers()

    assert "config-secret-99" not in str(caught.value)


@pytest.mark.django_db
def test_the_setting_creates_the_rows_once_per_process(mcp_setting, django_assert_num_queries):
    mcp_setting(
        [
            {
                "name": "tracker",
                "url": "https://mcp.example.com/mcp",
                "headers": {"Authorization": SECRET},
                "approval": ["send_message"],
            },
            {"name": "search", "url": "http://127.0.0.1:8931/mcp", "enabled": False},
        ]
    )

    mcp_servers_ensure()

    tracker = McpServer.objects.get(name="tracker")
    assert tracker.headers == {"Authorization": SECRET}
    assert tracker.approval == ["send_message"]
    assert tracker.enabled is True
    assert McpServer.objects.get(name="search").enabled is False
    with django_assert_num_queries(0):
        mcp_servers_ensure()  # done for this process


@pytest.mark.django_db
def test_the_setting_updates_a_row_and_keeps_what_it_leaves_out(mcp_setting):
    McpServer.objects.create(
        name="tracker",
        url="https://old.example.com/mcp",
        headers={"Authorization": SECRET},
        approval=["drop_table"],
        enabled=False,
    )
    mcp_setting([{"name": "tracker", "url": "https://new.example.com/mcp", "enabled": True}])

    mcp_servers_ensure()

    tracker = McpServer.objects.get(name="tracker")
    assert tracker.url == "https://new.example.com/mcp"
    assert tracker.enabled is True
    # Headers and the approval list set in the admin stay: the entry does not name them.
    assert tracker.headers == {"Authorization": SECRET}
    assert tracker.approval == ["drop_table"]
    assert McpServer.objects.count() == 1


@pytest.mark.django_db
def test_a_missing_table_is_logged_and_tried_again_later(mcp_setting, log_records):
    from django.db import connection

    mcp_setting([{"name": "tracker", "url": "https://mcp.example.com/mcp"}])
    table = McpServer._meta.db_table
    with connection.cursor() as cursor:  # as before `migrate` (the test's transaction undoes it)
        cursor.execute(f"ALTER TABLE {table} RENAME TO {table}_away")

    mcp_servers_ensure()  # no crash

    assert any("AGENT_MCP_SERVERS not written yet" in r.getMessage() for r in log_records)
    with connection.cursor() as cursor:
        cursor.execute(f"ALTER TABLE {table}_away RENAME TO {table}")
    mcp_servers_ensure()  # the next use writes it
    assert McpServer.objects.filter(name="tracker").exists()


def _check(tmp_path, servers: str) -> subprocess.CompletedProcess[str]:
    """`manage.py check` in a fresh process: the start, with AGENT_MCP_SERVERS from the
    environment."""
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "REDIS_URL")}
    env.update(
        AGENT_MCP_SERVERS=servers,
        ROLLBACK_VAR_DIR=str(tmp_path),
        DJANGO_SETTINGS_MODULE="rollback_site.settings",
    )
    return subprocess.run(
        [sys.executable, "manage.py", "check"],
        cwd=Path(__file__).resolve().parents[2],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_a_bad_entry_in_the_environment_stops_the_start_without_its_secret(tmp_path):
    good = _check(tmp_path, '[{"name": "tracker", "url": "https://mcp.example.com/mcp"}]')
    assert good.returncode == 0, good.stderr

    bad = _check(
        tmp_path,
        '[{"name": "tracker", "url": "mcp.example.com", "headers": {"Authorization": "'
        + SECRET
        + '"}}]',
    )
    assert bad.returncode != 0
    assert "AGENT_MCP_SERVERS[0] ('tracker'): the url must be an http(s) URL." in bad.stderr
    assert "config-secret-99" not in bad.stderr + bad.stdout


@pytest.mark.django_db
def test_a_workers_first_claim_looks_after_the_setting_is_written(mcp_setting, session):
    # The claim's read looks whether any server is enabled (a turn with none reads no server):
    # the setting's rows are written before it looks, so a new process's first turn offers them.
    queued = turn_start(session=session, message="hi")
    turn = claim_queued(queued.pk)
    assert turn is not None
    assert not claim_may_find(turn, MCP_SERVERS_ENABLED)

    mcp_setting([{"name": "tracker", "url": "https://mcp.example.com/mcp"}])
    forget_sync()  # a new process, started with the setting
    turn_fail(turn=turn, error="next")
    queued = turn_start(session=session, message="again")
    turn = claim_queued(queued.pk)
    assert turn is not None
    assert claim_may_find(turn, MCP_SERVERS_ENABLED)
    assert not claim_may_find(turn, OWNER_HAS_MEMORIES)
