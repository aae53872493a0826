"""The production shape: the Redis channel layer and a real Celery worker running the turns.

Runs in the Redis phase of `make test` only, in the `stack` xdist group with tests/deploy: it
uses their Redis database (`tests.procs.stack_redis_url`) and its own SQLite file, shared by
daphne and the worker.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator

import pytest
from playwright.sync_api import expect

from tests.fakes.chat_server import Reply
from tests.procs import stack_redis_url

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

STALE_SECONDS = 4


class Stack(Services):
    """daphne, Celery workers and beat on Redis."""

    def start_beat(self, env: dict[str, str]) -> None:
        schedule = str(self.log_dir / "beat-schedule")
        cmd = [sys.executable, "-m", "celery", "-A", "rollback_site", "beat", "-s", schedule]
        self.start("beat", cmd, env)

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
            if " ready." in self.output(name):
                return name
            time.sleep(0.1)
        raise RuntimeError("the Celery worker did not get ready within 60 s")


@pytest.fixture(autouse=True)
def _fresh_cache():
    """Not the suite's per-test FLUSHDB: this process's cache is the stack's Redis database (its
    worker's heartbeats, Celery's queues, channel groups), flushed once before and after."""
    return


@pytest.fixture(scope="module")
def stack(model_server, tmp_path_factory) -> Iterator[tuple[Stack, dict[str, str]]]:
    import redis

    url = stack_redis_url()
    client = redis.Redis.from_url(url)
    client.flushdb()
    services = Stack(tmp_path_factory.mktemp("e2e-worker-logs"))
    env = app_env(
        tmp_path_factory.mktemp("e2e-worker-var"),
        model_server.base_url,
        REDIS_URL=url,
        AGENT_TURN_STALE_SECONDS=str(STALE_SECONDS),
        TURN_HEARTBEAT_SECONDS="1",
        TURN_RECOVERY_SECONDS="1",
    )
    try:
        services.prepare(env)
        services.start_daphne(env)
        services.start_worker(env)
        services.start_beat(env)
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


def kill_worker_mid_reply(services: Stack, env: dict[str, str], page, llm) -> None:
    """Send "second", let its reply start streaming, kill -9 the worker and start a fresh one."""
    send_message(page, "second")
    expect(page.locator("[data-streaming=true] .body")).not_to_have_text("")
    services.kill(f"worker{services.workers}")
    services.start_worker(env)


CUT = "This reply never finishes because its worker is killed " + "now and then " * 20


def test_a_reply_whose_worker_dies_is_answered_by_another_worker(stack, contexts, llm):
    """The recovery job (beat) hands the turn to the fresh worker, which answers it from the
    user's message; the open page shows the whole reply without a reload, stored once."""
    services, env = stack
    page = contexts.new().new_page()
    sign_up(page, services.base_url)
    new_session(page)
    chat(page, "first")
    final = "Answered by the worker that took over"
    llm.queue(Reply(CUT, delay=0.5), Reply(final, delay=0.05))
    kill_worker_mid_reply(services, env, page, llm)

    wait_turn_done(page, {"users": 1, "assistants": 1}, timeout=40_000)
    assert message_texts(page) == ["first", "Echo: first", "second", final]
    assert conversation(llm.messages(-1)) == [
        ("user", "first"),
        ("assistant", "Echo: first"),
        ("user", "second"),
    ]
    expect(page.get_by_test_id("message-input")).to_be_enabled()
    page.reload()
    assert message_texts(page) == ["first", "Echo: first", "second", final]


def test_when_every_attempt_dies_the_page_shows_the_failure_and_takes_a_new_message(
    stack, contexts, llm
):
    services, env = stack
    page = contexts.new().new_page()
    sign_up(page, services.base_url)
    new_session(page)
    chat(page, "first")
    llm.queue(Reply(CUT, delay=0.5), Reply(CUT, delay=0.5))
    kill_worker_mid_reply(services, env, page, llm)
    deadline = time.monotonic() + 40
    while len(llm.requests) < 3 and time.monotonic() < deadline:  # the second attempt started
        time.sleep(0.1)
    assert len(llm.requests) == 3
    # The second attempt's reply is streaming on the page when its worker is killed.
    second = page.locator('[data-streaming=true] .body[data-attempt="2"]')
    expect(second).not_to_have_text("", timeout=20_000)
    services.kill(f"worker{services.workers}")
    services.start_worker(env)

    expect(page.get_by_test_id("turn-error")).to_be_visible(timeout=40_000)
    expect(page.locator("[data-streaming=true]")).to_have_count(0)
    expect(page.get_by_test_id("message-input")).to_be_enabled()
    chat(page, "third")
    assert message_texts(page, "user") == ["first", "second", "third"]
    # The failed turn's message and the new one reach the model as one user message (roles
    # alternate, as strict chat templates require); both stay separate on the page.
    assert last_reply(page) == "Echo: second\n\nthird"


CANCEL_THROUGH_THE_API = """async (id) => {
    const headers = JSON.parse(document.body.getAttribute("hx-headers"));
    const answer = await fetch(`/api/v1/turns/${id}/cancel/`, {
        method: "POST",
        headers: {...headers, "Content-Type": "application/json"},
        body: "{}",
    });
    return [answer.status, await answer.json()];
}"""


def test_stop_through_the_api_cancels_a_turn_running_on_a_celery_worker(stack, contexts, llm):
    """The worker, in another process, notices the cancel, closes the model's stream and keeps
    the partial reply marked stopped; the page shows it stopped and the next turn runs."""
    services, _ = stack
    page = contexts.new().new_page()
    sign_up(page, services.base_url)
    new_session(page)
    long = " ".join(f"word{i}" for i in range(60))  # 0.3 s apart: 18 s unless stopped
    llm.queue(Reply(long, delay=0.3))
    send_message(page, "tell me a long story")
    bubble = page.locator("#messages [data-streaming=true]")
    expect(bubble.locator(".body")).to_contain_text("word2", timeout=20_000)
    turn_id = int((bubble.get_attribute("id") or "").removeprefix("turn-"))

    status, body = page.evaluate(CANCEL_THROUGH_THE_API, turn_id)
    assert status == 200, body
    assert body["status"] == "cancelled"
    assert body["finish_reason"] == "cancelled"

    # Kept by the cancel itself: the page shows the stopped reply in its final form at once.
    expect(page.get_by_test_id("stopped-badge")).to_have_count(1)
    expect(page.locator("#messages [data-streaming=true]")).to_have_count(0)
    deadline = time.monotonic() + 10
    while not llm.abandoned and time.monotonic() < deadline:
        time.sleep(0.1)
    assert llm.abandoned == 1  # the worker closed the model's stream
    page.reload()
    texts = message_texts(page)
    assert texts[0] == "tell me a long story"
    assert len(texts) == 2
    assert long.startswith(texts[1])
    assert texts[1] != long

    chat(page, "next")
    assert last_reply(page) == "Echo: next"
