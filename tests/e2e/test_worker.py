"""The production shape: the Redis channel layer and a real Celery worker running the turns.

Runs in the Redis phase of `make test` only. It uses Redis database 14 (the suite uses 15) and
its own SQLite file, shared by daphne and the worker.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Iterator
from urllib.parse import urlsplit, urlunsplit

import pytest
from playwright.sync_api import expect

from tests.fakes.chat_server import Reply

from .conftest import (
    Services,
    app_env,
    assert_seen_streaming,
    chat,
    conversation,
    last_reply,
    message_texts,
    new_session,
    record_stream,
    send_message,
    sign_up,
    wait_turn_done,
)

pytestmark = [pytest.mark.e2e, pytest.mark.redis]

STALE_SECONDS = 5


def redis_db14() -> str:
    parts = urlsplit(os.environ["REDIS_URL"])
    return urlunsplit(parts._replace(path="/14"))


class Stack(Services):
    """daphne and Celery workers on Redis."""

    workers = 0

    def start_worker(self, env: dict[str, str]) -> str:
        self.workers += 1
        name = f"worker{self.workers}"
        cmd = [sys.executable, "-m", "celery", "-A", "rollback_site", "worker"]
        cmd += ["--pool=solo", "--concurrency=1", "--loglevel=INFO", "-n", f"e2e-{name}@%h"]
        proc = self.start(name, cmd, env)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                raise RuntimeError(f"the Celery worker exited with {proc.returncode}")
            if " ready." in self.logs[name].read_text(errors="replace"):
                return name
            time.sleep(0.1)
        raise RuntimeError("the Celery worker did not get ready within 60 s")


@pytest.fixture(scope="module")
def stack(model_server, tmp_path_factory) -> Iterator[tuple[Stack, dict[str, str]]]:
    import redis

    url = redis_db14()
    client = redis.Redis.from_url(url)
    client.flushdb()
    services = Stack(tmp_path_factory.mktemp("e2e-worker-logs"))
    env = app_env(
        tmp_path_factory.mktemp("e2e-worker-var"),
        model_server.base_url,
        REDIS_URL=url,
        AGENT_TURN_STALE_SECONDS=str(STALE_SECONDS),
    )
    try:
        services.prepare(env)
        services.start_daphne(env)
        services.start_worker(env)
        yield services, env
    finally:
        services.stop_all()
        client.flushdb()
        client.close()


def test_a_turn_streams_through_redis_and_a_celery_worker(stack, contexts, llm):
    services, _ = stack
    page = contexts.new().new_page()
    sign_up(page, services.base_url)
    new_session(page)
    final = "The worker streams this reply over Redis"
    llm.queue(Reply(final, delay=0.15))
    record_stream(page)

    before = send_message(page, "hello worker")
    expect(page.locator("[data-streaming=true]")).to_be_visible()
    wait_turn_done(page, before)

    assert_seen_streaming(page, final)
    assert message_texts(page) == ["hello worker", final]
    assert "Task agents.run_turn" in services.logs["worker1"].read_text()


# What htmx sends for the composer, made with fetch: the page's own CSRF header and cookies.
POST_MESSAGE = """async ([url, text]) => {
    const headers = JSON.parse(document.body.getAttribute("hx-headers"));
    headers["HX-Request"] = "true";
    const body = new URLSearchParams({message: text});
    const response = await fetch(url, {method: "POST", headers, body});
    return {status: response.status, text: await response.text()};
}"""


def kill_worker_mid_reply(services: Stack, env: dict[str, str], page, llm) -> None:
    """Send "second", let its reply start streaming, kill -9 the worker, start a fresh one and
    wait until the dead turn counts as stale."""
    llm.queue(Reply("This reply never finishes because its worker is killed now", delay=0.5))
    send_message(page, "second")
    expect(page.locator("[data-streaming=true] .body")).not_to_have_text("")
    services.kill(f"worker{services.workers}")
    services.start_worker(env)
    time.sleep(STALE_SECONDS + 1)


def test_after_a_worker_dies_the_next_message_is_accepted(stack, contexts, llm):
    """The server side of a dead worker: once the turn is stale, a new message is accepted (not
    refused as "in progress"), the killed turn's user message stays, and the fresh worker
    answers. The message is posted as htmx would post it, since the page keeps its composer
    disabled until the page notices the turn expired (see the next test)."""
    services, env = stack
    page = contexts.new().new_page()
    sign_up(page, services.base_url)
    sid = new_session(page)
    chat(page, "first")
    kill_worker_mid_reply(services, env, page, llm)

    before = {"users": 2, "assistants": 1}
    answer = page.evaluate(POST_MESSAGE, [f"/chat/{sid}/send/", "third"])
    assert answer["status"] == 200, answer
    wait_turn_done(page, before)

    assert message_texts(page, "user") == ["first", "second", "third"]
    assert last_reply(page) == "Echo: third"
    assert conversation(llm.messages(-1)) == [
        ("user", "first"),
        ("assistant", "Echo: first"),
        ("user", "second"),
        ("user", "third"),
    ]
    assert "Task agents.run_turn" in services.logs[f"worker{services.workers}"].read_text()
    page.reload()
    assert message_texts(page, "user") == ["first", "second", "third"]
    expect(page.get_by_test_id("message-input")).to_be_enabled()


def test_after_a_worker_dies_the_page_shows_the_turn_failed_and_takes_a_new_message(
    stack, contexts, llm
):
    services, env = stack
    page = contexts.new().new_page()
    sign_up(page, services.base_url)
    new_session(page)
    chat(page, "first")
    kill_worker_mid_reply(services, env, page, llm)

    page.reload()
    expect(page.locator("[data-streaming=true]")).to_have_count(0, timeout=3000)
    expect(page.get_by_test_id("turn-error")).to_be_visible(timeout=3000)
    expect(page.get_by_test_id("message-input")).to_be_enabled(timeout=3000)
    chat(page, "third")
    assert message_texts(page, "user") == ["first", "second", "third"]
    assert last_reply(page) == "Echo: third"
