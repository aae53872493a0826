"""The retention rules as an operator runs them: beat reads their schedules from the database
(django-celery-beat, edited here as the admin would), a worker runs them, each run leaves an audit
record naming its schedule, and an integration's socket hears what changed."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator

import pytest

from .conftest import Client, Stack, deploy_env, listen, running

pytestmark = [pytest.mark.postgres, pytest.mark.redis]


@pytest.fixture(scope="module")
def stack(model_server, database, fresh_redis, tmp_path_factory) -> Iterator[Stack]:
    env = deploy_env(tmp_path_factory.mktemp("retention-var"), model_server.base_url, database.url)
    with running(tmp_path_factory, "retention", env) as stack:
        stack.web("web")
        yield stack


def test_beat_runs_the_archiving_rule_from_its_edited_schedule(stack, database):
    key = stack.api_key("sleeper")
    client = Client(stack.urls["web"], key)
    idle = client.post("/sessions/", {"name": "idle for weeks"})
    recent = client.post("/sessions/", {"name": "used today"})
    database.query(
        "UPDATE sessions_app_externalsession SET updated_at = now() - interval '40 days' "
        "WHERE id = %s RETURNING id",
        idle["id"],
    )
    # The operator makes the nightly rule run every 2 seconds (the admin's "Periodic tasks").
    stack.manage(
        stack.env,
        "shell",
        "-c",
        "from django_celery_beat.models import IntervalSchedule, PeriodicTask; "
        "every = IntervalSchedule.objects.create(every=2, period='seconds'); "
        "PeriodicTask.objects.filter(name='Archive idle sessions')"
        ".update(crontab=None, interval=every)",
    )
    events: list[dict] = []
    opened = threading.Event()

    async def watch() -> str:
        return await listen(
            client,
            idle["id"],
            events,
            lambda got: any(e["type"] == "session.changed" for e in got),
            time.monotonic() + 60,
            opened,
        )

    async def run() -> str:
        listening = asyncio.create_task(watch())
        # The socket is open before anything runs.
        assert await asyncio.to_thread(opened.wait, 30)
        stack.worker("worker")
        stack.beat()
        return await listening

    assert asyncio.run(run()) == "done"
    assert events[-1] == {
        "type": "session.changed",
        "session": idle["id"],
        "name": "idle for weeks",
        "archived": True,
        "pinned": False,
        "metadata": {},
    }
    archived = client.get("/sessions/?archived=true")["results"]
    assert [s["id"] for s in archived] == [idle["id"]]
    assert [s["id"] for s in client.get("/sessions/")["results"]] == [recent["id"]]
    rows = database.query(
        "SELECT trigger, schedule, status, affected, dry_run FROM ops_auditrecord "
        "WHERE rule = 'archive_idle_sessions' ORDER BY id"
    )
    assert rows[0] == ("schedule", "Archive idle sessions", "done", 1, False)
    # Later runs find nothing more to archive; each still leaves its record.
    deadline = time.monotonic() + 20
    while len(rows) < 2 and time.monotonic() < deadline:
        time.sleep(0.5)
        rows = database.query(
            "SELECT affected FROM ops_auditrecord WHERE rule = 'archive_idle_sessions' "
            "AND status = 'done' ORDER BY id"
        )
    assert len(rows) >= 2
    assert rows[1] == (0,)
    client.close()
