"""A Telegram update that arrives while the broker is down is answered once it is back, exactly
once. The deployment (daphne, a Celery worker and beat on PostgreSQL) runs on a Redis server of
its own, which the test stops between the webhook and the task and starts again: the webhook
stores the update (and answers 200: it is safe in the database), Telegram's redelivery finds it
stored and handled by nobody, and beat's sweep handles it once Redis answers again. Before: the
webhook answered 503, the redelivery was taken for a duplicate and the update was never handled.
"""

from __future__ import annotations

import itertools
import re
import shutil
import time
from collections.abc import Callable, Iterator

import httpx
import pytest
import redis

from tests.fakes.chat_server import Reply
from tests.fakes.telegram_server import FakeTelegram
from tests.procs import free_port

from .conftest import Client, Stack, deploy_env

pytestmark = [pytest.mark.postgres, pytest.mark.redis]

SECRET = "outage-s3cret"  # noqa: S105 (a test value)
SECRET_HEADER = "X-Telegram-Bot-Api-Secret-Token"  # noqa: S105 (a header name)
WEBHOOK = "/integrations/telegram/webhook/"
CHAT = 770033
_ids = itertools.count(7000)
SWEPT = re.compile(r"Task integrations\.sweep_updates\[[^\]]+\] succeeded")


class RedisServer:
    """A redis-server of the test's own, on a port of its own, without persistence: stopped,
    it refuses connections; started again, it is empty (whatever was queued is lost)."""

    def __init__(self, stack: Stack) -> None:
        binary = shutil.which("redis-server")
        assert binary, "the PostgreSQL/Redis phase needs redis-server on the PATH"
        self.stack = stack
        self.port = free_port()
        self.cmd = [binary, "--bind", "127.0.0.1", "--port", str(self.port)]
        self.cmd += ["--save", "", "--appendonly", "no"]
        self.url = f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        proc = self.stack.start("redis", self.cmd, {})
        self.stack.wait_for_log("redis", "Ready to accept connections", proc)
        self._wait(up=True)

    def stop(self) -> None:
        self.stack.stop("redis")
        self._wait(up=False)

    def _wait(self, *, up: bool) -> None:
        client = redis.Redis.from_url(self.url, socket_connect_timeout=1)
        deadline = time.monotonic() + 20
        try:
            while time.monotonic() < deadline:
                try:
                    answered = bool(client.ping())
                except redis.ConnectionError:
                    answered = False
                if answered == up:
                    return
                time.sleep(0.1)
        finally:
            client.close()
        raise AssertionError(f"redis-server did not {'start' if up else 'stop'}")


@pytest.fixture(scope="module")
def telegram() -> Iterator[FakeTelegram]:
    with FakeTelegram() as server:
        yield server


@pytest.fixture(scope="module")
def stack(model_server, telegram, database, tmp_path_factory) -> Iterator[Stack]:
    stack = Stack(tmp_path_factory.mktemp("telegram-outage-logs"), {})
    broker = RedisServer(stack)
    stack.env = deploy_env(
        tmp_path_factory.mktemp("telegram-outage-var"),
        model_server.base_url,
        database.url,
        REDIS_URL=broker.url,
        TELEGRAM_BOT_TOKEN=telegram.token,
        TELEGRAM_WEBHOOK_SECRET=SECRET,
        TELEGRAM_API_URL=telegram.url,
        # The sweep takes an update no task handled once it is 2 s old (beat: every 2 s).
        TELEGRAM_UPDATE_RETRY_SECONDS="2",
    )
    stack.broker = broker  # type: ignore[attr-defined]
    try:
        broker.start()
        stack.prepare(stack.env)
        stack.web("web")
        stack.worker("worker", pool="prefork")
        stack.beat()
        yield stack
    finally:
        stack.stop_all()


def message(text: str) -> dict:
    return {
        "update_id": next(_ids),
        "message": {
            "message_id": next(_ids),
            "date": int(time.time()),
            "chat": {"id": CHAT, "type": "private", "first_name": "Oda"},
            "from": {"id": CHAT, "is_bot": False, "first_name": "Oda"},
            "text": text,
        },
    }


def post(stack: Stack, update: dict) -> httpx.Response:
    return httpx.post(
        stack.urls["web"] + WEBHOOK, json=update, headers={SECRET_HEADER: SECRET}, timeout=60
    )


def sent(telegram: FakeTelegram, since: int) -> list[str]:
    """The texts sent to the chat with sendMessage since call number `since`."""
    return [
        c.params["text"]
        for c in telegram.calls[since:]
        if c.method == "sendMessage" and c.params.get("chat_id") == CHAT
    ]


def wait_until(check: Callable[[], bool], what: str, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {timeout:g} s: {what}")
        time.sleep(0.2)


def sweeps(stack: Stack) -> int:
    """How many rounds of the update sweep the worker has finished."""
    return len(SWEPT.findall(stack.logs["worker"].read_text(errors="replace")))


def two_more_sweeps(stack: Stack) -> None:
    done = sweeps(stack)
    wait_until(lambda: sweeps(stack) >= done + 2, "two more rounds of the sweep")


def test_an_update_posted_while_the_broker_is_down_is_answered_once_when_it_is_back(
    stack, telegram, model_server, database
):
    api = Client(stack.urls["web"], stack.api_key("oda"))
    code = api.post("/telegram/link/")["code"]
    api.close()
    before = len(telegram.calls)
    assert post(stack, message(f"/start {code}")).status_code == 200
    wait_until(lambda: any("Linked" in t for t in sent(telegram, before)), "the chat linked")
    model_server.reset()
    model_server.queue(Reply("Back, and answered once."))

    stack.broker.stop()
    before = len(telegram.calls)
    command, text = message("/help"), message("written while the broker was down")
    for update in (command, text):
        answer = post(stack, update)
        assert answer.status_code == 200, answer.text  # stored: safe, answered later
    for update in (command, text):
        assert post(stack, update).status_code == 200  # Telegram delivers it again
    stored = database.query(
        "SELECT update_id, handled_at IS NULL FROM integrations_telegramupdate "
        "WHERE update_id IN (%s, %s) ORDER BY update_id",
        command["update_id"],
        text["update_id"],
    )
    assert stored == [(command["update_id"], True), (text["update_id"], True)]
    assert sent(telegram, before) == []

    stack.broker.start()
    wait_until(
        lambda: "Back, and answered once." in telegram.texts(CHAT), "the turn's reply in the chat"
    )
    wait_until(lambda: any("/checkpoint NAME" in t for t in sent(telegram, before)), "the help")
    for update in (command, text):
        assert post(stack, update).status_code == 200  # a late redelivery: nothing new
    two_more_sweeps(stack)

    answers = sent(telegram, before)
    assert len(answers) == 2, answers
    assert sum("/checkpoint NAME" in t for t in answers) == 1
    rows = database.query(
        "SELECT update_id, attempts, handled_at IS NOT NULL FROM integrations_telegramupdate "
        "WHERE update_id IN (%s, %s) ORDER BY update_id",
        command["update_id"],
        text["update_id"],
    )
    assert rows == [(command["update_id"], 1, True), (text["update_id"], 1, True)]
    turns = database.query(
        "SELECT status FROM sessions_app_turn WHERE idempotency_key = %s",
        f"telegram-update:{text['update_id']}",
    )
    assert turns == [("done",)]
    assert len(model_server.requests) == 1
