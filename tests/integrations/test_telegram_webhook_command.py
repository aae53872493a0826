"""`manage.py telegram_webhook set URL` / `delete`, against the Telegram stand-in."""

from __future__ import annotations

from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from tests.integrations.conftest import WEBHOOK_SECRET

URL = "https://rollback.example.org/integrations/telegram/webhook/"


def run(*args: str) -> tuple[str, str]:
    out, err = StringIO(), StringIO()
    call_command("telegram_webhook", *args, stdout=out, stderr=err)
    return out.getvalue(), err.getvalue()


def test_set_sends_the_url_and_the_secret(telegram):
    out, err = run("set", URL)
    [call] = telegram.sent("setWebhook")
    assert call.params["url"] == URL
    assert call.params["secret_token"] == WEBHOOK_SECRET
    assert URL in out
    assert err == ""


def test_set_warns_about_another_path(telegram):
    _, err = run("set", "https://rollback.example.org/hook/")
    assert "does not end in /integrations/telegram/webhook/" in err
    assert telegram.sent("setWebhook")[0].params["url"] == "https://rollback.example.org/hook/"


@pytest.mark.parametrize(
    "url", ["http://rollback.example.org/integrations/telegram/webhook/", "ftp://x/", "nope"]
)
def test_set_refuses_what_telegram_cannot_post_to(telegram, url):
    with pytest.raises(CommandError, match="https://"):
        run("set", url)
    assert telegram.sent("setWebhook") == []


def test_set_refuses_without_a_secret(telegram, settings):
    settings.TELEGRAM_WEBHOOK_SECRET = ""
    with pytest.raises(CommandError, match="TELEGRAM_WEBHOOK_SECRET is empty"):
        run("set", URL)
    assert telegram.sent("setWebhook") == []


def test_both_refuse_with_the_bridge_off(settings):
    settings.TELEGRAM_BOT_TOKEN = ""
    for args in (("set", URL), ("delete",)):
        with pytest.raises(CommandError, match="TELEGRAM_BOT_TOKEN is empty"):
            run(*args)


def test_delete_deletes_the_webhook(telegram):
    out, _ = run("delete")
    assert len(telegram.sent("deleteWebhook")) == 1
    assert "deleted" in out


def test_a_refusal_of_telegram_is_a_command_error_with_its_reason(telegram):
    telegram.fail("setWebhook", status=400, description="Bad Request: bad webhook", times=5)
    with pytest.raises(CommandError, match=r"(?i)bad webhook"):
        run("set", URL)
