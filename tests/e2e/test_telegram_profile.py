"""The profile's Telegram section in Chromium, the app served with the bridge on (its answers go
to the Telegram stand-in, tests/fakes/telegram_server.py): "Link a Telegram chat" shows a
one-time code and the `/start CODE` to send, which copies, with a link into the bot's chat; that
message, posted to the webhook as Telegram would, links the chat (the bot answers "Linked"), the
profile lists it, and Unlink (confirmed) takes it away. Axe finds nothing serious (target size
included) and nothing scrolls sideways, at 1366 and 390 px in the light and the dark scheme. (The
section with the bridge off: the profile in test_accessibility.py, served without a token, and
tests/web.)"""

from __future__ import annotations

import itertools
import re
import time
from collections.abc import Iterator

import httpx
import pytest
from playwright.sync_api import expect

from tests.fakes.telegram_server import FakeTelegram

from .conftest import Services, app_env, sign_up
from .test_accessibility import violations

pytestmark = pytest.mark.e2e

WIDE, NARROW = {"width": 1366, "height": 900}, {"width": 390, "height": 844}
LOOKS = [(WIDE, "light"), (WIDE, "dark"), (NARROW, "light"), (NARROW, "dark")]
SECRET = "e2e-webhook-s3cret"  # noqa: S105 - a test value
SECRET_HEADER = "X-Telegram-Bot-Api-Secret-Token"  # noqa: S105 - a header name
WEBHOOK = "/integrations/telegram/webhook/"
_ids = itertools.count(7100)


@pytest.fixture(scope="module")
def telegram() -> Iterator[FakeTelegram]:
    with FakeTelegram() as server:
        yield server


@pytest.fixture(scope="module")
def telegram_app(model_server, telegram, tmp_path_factory) -> Iterator[Services]:
    """The app served with the Telegram bridge on, talking to the stand-in."""
    env = app_env(
        tmp_path_factory.mktemp("telegram-var"),
        model_server.base_url,
        TELEGRAM_BOT_TOKEN=telegram.token,
        TELEGRAM_WEBHOOK_SECRET=SECRET,
        TELEGRAM_API_URL=telegram.url,
        TELEGRAM_BOT_USERNAME="rollback_e2e_bot",
    )
    services = Services(tmp_path_factory.mktemp("telegram-logs"))
    try:
        services.prepare(env)
        services.start_daphne(env)
        yield services
    finally:
        services.stop_all()


def start(app: Services, chat_id: int, text: str) -> httpx.Response:
    """Telegram delivering a private chat's message to the webhook."""
    update = {
        "update_id": next(_ids),
        "message": {
            "message_id": next(_ids),
            "date": int(time.time()),
            "chat": {"id": chat_id, "type": "private", "first_name": "Pat"},
            "from": {"id": chat_id, "is_bot": False, "first_name": "Pat"},
            "text": text,
        },
    }
    return httpx.post(app.base_url + WEBHOOK, json=update, headers={SECRET_HEADER: SECRET})


def no_sideways_scroll(page) -> None:
    widths = page.evaluate(
        "() => ({page: document.documentElement.scrollWidth, window: window.innerWidth})"
    )
    assert widths["page"] <= widths["window"], widths


@pytest.mark.parametrize(
    ("size", "scheme"), LOOKS, ids=lambda v: v if isinstance(v, str) else v["width"]
)
def test_a_code_from_the_profile_links_a_chat_which_unlink_takes_away(
    contexts, telegram_app, telegram, size, scheme
):
    context = contexts.new(viewport=size, permissions=["clipboard-read", "clipboard-write"])
    page = context.new_page()
    page.emulate_media(color_scheme=scheme)
    sign_up(page, telegram_app.base_url)
    page.goto(f"{telegram_app.base_url}/accounts/profile/")
    section = page.locator("#telegram")
    expect(section.get_by_test_id("no-telegram-chats")).to_be_visible()

    page.get_by_test_id("telegram-link").click()
    notice = page.get_by_test_id("telegram-code-notice")
    expect(notice).to_be_visible()
    expect(notice).to_contain_text(re.compile(r"before \d\d:\d\d"))
    message = page.get_by_test_id("telegram-start")
    expect(message).to_have_text(re.compile(r"^/start [A-HJKMNP-Z2-9]{8}$"))
    sent = message.inner_text().strip()
    # One tap into the bot's chat, which sends the same message.
    opener = notice.get_by_test_id("telegram-open")
    expect(opener).to_be_visible()
    expect(opener).to_have_text("Open @rollback_e2e_bot in Telegram")
    code = sent.removeprefix("/start ")
    expect(opener).to_have_attribute("href", f"https://t.me/rollback_e2e_bot?start={code}")
    page.get_by_test_id("copy-telegram-start").click()
    expect(notice.locator("[data-copy-status]")).to_have_text("Copied.")
    assert page.evaluate("() => navigator.clipboard.readText()") == sent
    no_sideways_scroll(page)
    assert violations(page, targets=True) == [], "the section with its code"

    # Sent to the bot: the chat is linked, and the bot says so.
    chat_id = next(_ids)
    assert start(telegram_app, chat_id, sent).status_code == 200
    telegram.wait_for(
        lambda calls: any(text.startswith("Linked") for text in telegram.texts(chat_id))
    )
    page.goto(f"{telegram_app.base_url}/accounts/profile/")
    row = page.get_by_test_id("telegram-chat-row")
    expect(row).to_have_count(1)
    expect(row).to_contain_text("Pat")
    expect(row).to_contain_text(str(chat_id))
    no_sideways_scroll(page)
    assert violations(page, targets=True) == [], "the section with a linked chat"

    questions: list[str] = []

    def accept(dialog) -> None:
        questions.append(dialog.message)
        dialog.accept()

    page.once("dialog", accept)
    with page.expect_navigation():
        row.get_by_test_id("telegram-unlink").click()
    assert questions == ["Unlink the Telegram chat “Pat”? Its conversation stays here."]
    page.wait_for_url(re.compile(r"/accounts/profile/#telegram$"))
    expect(page.get_by_test_id("telegram-chat-row")).to_have_count(0)
    expect(section.get_by_test_id("no-telegram-chats")).to_be_visible()
