"""A real local HTTP server that stands in for Telegram's Bot API, for tests.

Standard library only. It serves `/bot<token>/<method>` on 127.0.0.1, records every call it
accepts, and answers the way Telegram does (the shapes python-telegram-bot 22.8 reads)::

    with FakeTelegram().start() as telegram:
        settings.TELEGRAM_BOT_TOKEN = telegram.token
        settings.TELEGRAM_API_URL = telegram.url
        ...
        telegram.wait_for(lambda calls: any(c.method == "sendMessage" for c in calls))
        assert telegram.texts(chat_id) == ["Hello"]

Bodies are accepted as python-telegram-bot sends them (application/x-www-form-urlencoded with
JSON-encoded non-string values, or multipart/form-data) and as JSON; every recorded call's
`params` hold decoded values (`chat_id` an int, `entities` a list of dicts).

What it answers:
- a wrong token: 401 Unauthorized; an unknown method: 404 Not Found;
- sendMessage / editMessageText: the Message (message ids increase across the server), or a 400
  for an empty text, a text over 4,096 UTF-16 code units, an edit that changes nothing ("message
  is not modified") and an edit or deletion of a message it does not know;
- sendChatAction, setWebhook, deleteWebhook, deleteMessage: true; getMe: the bot's User;
  getWebhookInfo: the webhook set;
- `refuse(method, retry_after=N, times=K)`: the next K calls of the method get Telegram's 429;
  `fail(method, status=, description=, times=, with_entities=)`: any other error answer.
Refused and failed calls are recorded too (in `calls`, with `status` set).
"""

from __future__ import annotations

import email.parser
import email.policy
import itertools
import json
import secrets
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qsl

__all__ = ["Call", "FakeTelegram", "utf16_len"]

MAX_TEXT = 4096
BOT_ID = 7000001
BOT_USERNAME = "rollback_test_bot"

# Parameters whose values are strings as sent (never JSON-decoded, even when they look like JSON).
_STRING_PARAMS = {
    "text",
    "caption",
    "parse_mode",
    "url",
    "secret_token",
    "action",
    "ip_address",
    "inline_message_id",
    "business_connection_id",
    "message_effect_id",
}


def utf16_len(text: str) -> int:
    """The length Telegram counts: UTF-16 code units."""
    return len(text.encode("utf-16-le")) // 2


@dataclass
class Call:
    """One request the server accepted: its method, decoded parameters and arrival time."""

    method: str
    params: dict[str, Any]
    at: float  # time.monotonic() when it arrived
    status: int = 200  # the HTTP status it was answered with


@dataclass
class _Message:
    message_id: int
    chat_id: int
    text: str
    entities: list[dict[str, Any]] = field(default_factory=list)
    date: int = 0
    edit_date: int | None = None
    deleted: bool = False


class FakeTelegram:
    """Telegram's Bot API on 127.0.0.1: `url` is the TELEGRAM_API_URL (no `/bot` suffix)."""

    def __init__(self, token: str | None = None) -> None:
        self.token = token or f"{BOT_ID}:{secrets.token_urlsafe(24)}"
        self.calls: list[Call] = []
        self.webhook: dict[str, Any] = {}
        self._messages: dict[int, _Message] = {}
        self._ids = itertools.count(1)
        self._refusals: dict[str, list[int]] = {}  # method -> [retry_after, times left]
        self._failures: dict[str, list[Any]] = {}  # method -> [status, description, times left]
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)
        self._httpd: _HTTPServer | None = None
        self._thread: threading.Thread | None = None

    # lifecycle -------------------------------------------------------------------------------

    def start(self) -> FakeTelegram:
        if self._httpd is not None:
            return self
        self._httpd = _HTTPServer(self)
        self._thread = threading.Thread(
            target=self._httpd.serve_forever,
            kwargs={"poll_interval": 0.05},
            name=f"FakeTelegram:{self.port}",
            daemon=True,
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        httpd, thread = self._httpd, self._thread
        if httpd is None:
            return
        httpd.shutdown()
        httpd.server_close()
        if thread is not None:
            thread.join(timeout=5)
        self._httpd = self._thread = None

    def __enter__(self) -> FakeTelegram:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    @property
    def port(self) -> int:
        if self._httpd is None:
            raise RuntimeError("FakeTelegram is not started")
        return int(self._httpd.server_address[1])

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    # scripting -------------------------------------------------------------------------------

    def refuse(self, method: str, *, retry_after: int = 1, times: int = 1) -> None:
        """The next `times` calls of `method` get 429 Too Many Requests, retry after N."""
        with self._lock:
            self._refusals[method] = [retry_after, times]

    def fail(
        self,
        method: str,
        *,
        status: int = 400,
        description: str = "Bad Request",
        times: int = 1,
        with_entities: bool = False,
    ) -> None:
        """The next `times` calls of `method` get this error answer; with `with_entities`, only
        those calls that carry entities (formatted text) do."""
        with self._lock:
            self._failures[method] = [status, description, times, with_entities]

    def reset(self) -> None:
        with self._lock:
            self.calls.clear()
            self._messages.clear()
            self._refusals.clear()
            self._failures.clear()
            self.webhook = {}

    # reading ---------------------------------------------------------------------------------

    def sent(self, method: str | None = None, *, chat_id: int | None = None) -> list[Call]:
        """The calls accepted (status 200), optionally of one method and one chat."""
        with self._lock:
            calls = list(self.calls)
        return [
            c
            for c in calls
            if c.status == 200
            and (method is None or c.method == method)
            and (chat_id is None or c.params.get("chat_id") == chat_id)
        ]

    def wait_for(self, predicate: Callable[[list[Call]], bool], timeout: float = 15) -> list[Call]:
        """Wait until `predicate(calls)` holds (all calls, refused ones included); returns the
        calls. Raises AssertionError with what was received when it does not in time."""
        deadline = time.monotonic() + timeout
        while True:
            with self._lock:
                calls = list(self.calls)
            # Outside the lock: the predicate may read the server (texts, sent), which locks.
            if predicate(calls):
                return calls
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                summary = [(c.method, c.status, c.params) for c in calls]
                raise AssertionError(f"Telegram stand-in: not in {timeout}s; got {summary}")
            with self._changed:
                if len(self.calls) == len(calls):
                    self._changed.wait(min(remaining, 0.2))

    def texts(self, chat_id: int) -> list[str]:
        """What the chat shows now: the latest text of each message not deleted, in order."""
        with self._lock:
            return [
                m.text
                for m in sorted(self._messages.values(), key=lambda m: m.message_id)
                if m.chat_id == chat_id and not m.deleted
            ]

    def messages(self, chat_id: int) -> list[dict[str, Any]]:
        """The chat's messages now, as Telegram would return them (with entities)."""
        with self._lock:
            return [
                self._message_json(m)
                for m in sorted(self._messages.values(), key=lambda m: m.message_id)
                if m.chat_id == chat_id and not m.deleted
            ]

    # answering -------------------------------------------------------------------------------

    def _handle(self, token: str, method: str, params: dict[str, Any]) -> tuple[int, dict]:
        if token != self.token:
            return 401, {"ok": False, "error_code": 401, "description": "Unauthorized"}
        with self._changed:
            status, body = self._answer(method, params)
            self.calls.append(Call(method, params, time.monotonic(), status))
            self._changed.notify_all()
        return status, body

    def _answer(self, method: str, params: dict[str, Any]) -> tuple[int, dict]:
        refusal = self._refusals.get(method)
        if refusal and refusal[1] > 0:
            refusal[1] -= 1
            n = refusal[0]
            return 429, {
                "ok": False,
                "error_code": 429,
                "description": f"Too Many Requests: retry after {n}",
                "parameters": {"retry_after": n},
            }
        failure = self._failures.get(method)
        if failure and failure[2] > 0 and (not failure[3] or params.get("entities")):
            failure[2] -= 1
            return _error(failure[0], failure[1])
        handler = _METHODS.get(method.lower())
        if handler is None:
            return _error(404, "Not Found")
        try:
            return handler(self, params)
        except (KeyError, TypeError, ValueError) as exc:
            return _error(400, f"Bad Request: {exc}")

    def _message_json(self, m: _Message) -> dict[str, Any]:
        out: dict[str, Any] = {
            "message_id": m.message_id,
            "date": m.date,
            "chat": {"id": m.chat_id, "type": "private"},
            "from": _bot_user(),
            "text": m.text,
        }
        if m.entities:
            out["entities"] = m.entities
        if m.edit_date is not None:
            out["edit_date"] = m.edit_date
        return out

    def _send_message(self, params: dict[str, Any]) -> tuple[int, dict]:
        chat_id = int(params["chat_id"])
        text = str(params.get("text", ""))
        problem = _text_problem(text)
        if problem:
            return _error(400, problem)
        m = _Message(
            message_id=next(self._ids),
            chat_id=chat_id,
            text=text,
            entities=list(params.get("entities") or []),
            date=int(time.time()),
        )
        self._messages[m.message_id] = m
        return 200, {"ok": True, "result": self._message_json(m)}

    def _edit_message_text(self, params: dict[str, Any]) -> tuple[int, dict]:
        chat_id = int(params["chat_id"])
        m = self._messages.get(int(params["message_id"]))
        if m is None or m.chat_id != chat_id or m.deleted:
            return _error(400, "Bad Request: message to edit not found")
        text = str(params.get("text", ""))
        problem = _text_problem(text)
        if problem:
            return _error(400, problem)
        entities = list(params.get("entities") or [])
        if text == m.text and entities == m.entities:
            return _error(
                400,
                "Bad Request: message is not modified: specified new message content and "
                "reply markup are exactly the same as a current content and reply markup "
                "of the message",
            )
        m.text, m.entities, m.edit_date = text, entities, int(time.time())
        return 200, {"ok": True, "result": self._message_json(m)}

    def _delete_message(self, params: dict[str, Any]) -> tuple[int, dict]:
        chat_id = int(params["chat_id"])
        m = self._messages.get(int(params["message_id"]))
        if m is None or m.chat_id != chat_id or m.deleted:
            return _error(400, "Bad Request: message to delete not found")
        m.deleted = True
        return _true()

    def _send_chat_action(self, params: dict[str, Any]) -> tuple[int, dict]:
        int(params["chat_id"])
        if not params.get("action"):
            return _error(400, "Bad Request: wrong parameter action in request")
        return _true()

    def _set_webhook(self, params: dict[str, Any]) -> tuple[int, dict]:
        url = str(params.get("url", ""))
        if url and not url.startswith("https://"):
            return _error(
                400, "Bad Request: bad webhook: An HTTPS URL must be provided for webhook"
            )
        self.webhook = dict(params) if url else {}
        return 200, {"ok": True, "result": True, "description": "Webhook was set"}

    def _delete_webhook(self, params: dict[str, Any]) -> tuple[int, dict]:
        self.webhook = {}
        return 200, {"ok": True, "result": True, "description": "Webhook was deleted"}

    def _get_webhook_info(self, params: dict[str, Any]) -> tuple[int, dict]:
        return 200, {
            "ok": True,
            "result": {
                "url": self.webhook.get("url", ""),
                "has_custom_certificate": False,
                "pending_update_count": 0,
            },
        }

    def _get_me(self, params: dict[str, Any]) -> tuple[int, dict]:
        me = _bot_user() | {
            "can_join_groups": True,
            "can_read_all_group_messages": False,
            "supports_inline_queries": False,
        }
        return 200, {"ok": True, "result": me}


_METHODS: dict[str, Callable[[FakeTelegram, dict[str, Any]], tuple[int, dict]]] = {
    "sendmessage": FakeTelegram._send_message,
    "editmessagetext": FakeTelegram._edit_message_text,
    "deletemessage": FakeTelegram._delete_message,
    "sendchataction": FakeTelegram._send_chat_action,
    "setwebhook": FakeTelegram._set_webhook,
    "deletewebhook": FakeTelegram._delete_webhook,
    "getwebhookinfo": FakeTelegram._get_webhook_info,
    "getme": FakeTelegram._get_me,
}


def _bot_user() -> dict[str, Any]:
    return {"id": BOT_ID, "is_bot": True, "first_name": "Rollback", "username": BOT_USERNAME}


def _true() -> tuple[int, dict]:
    return 200, {"ok": True, "result": True}


def _error(status: int, description: str) -> tuple[int, dict]:
    return status, {"ok": False, "error_code": status, "description": description}


def _text_problem(text: str) -> str | None:
    if not text.strip():
        return "Bad Request: message text is empty"
    if utf16_len(text) > MAX_TEXT:
        return "Bad Request: message is too long"
    return None


def _decode(name: str, value: str) -> Any:
    """A form field's value: python-telegram-bot JSON-encodes every value that is not a str."""
    if name in _STRING_PARAMS:
        return value
    try:
        return json.loads(value)
    except ValueError:
        return value


def parse_body(content_type: str, body: bytes) -> dict[str, Any]:
    """The parameters of a Bot API request body, decoded."""
    kind = content_type.split(";", 1)[0].strip().lower()
    if not body:
        return {}
    if kind == "application/json":
        loaded = json.loads(body)
        return dict(loaded) if isinstance(loaded, dict) else {}
    if kind == "multipart/form-data":
        raw = f"Content-Type: {content_type}\r\n\r\n".encode() + body
        message = email.parser.BytesParser(policy=email.policy.HTTP).parsebytes(raw)
        params: dict[str, Any] = {}
        for part in message.iter_parts():
            name = part.get_param("name", header="content-disposition")
            if not isinstance(name, str):
                continue
            payload = part.get_payload(decode=True)
            data = payload if isinstance(payload, bytes) else b""
            if part.get_filename():
                params[name] = data  # an uploaded file: its bytes
            else:
                params[name] = _decode(name, data.decode("utf-8"))
        return params
    pairs = parse_qsl(body.decode("utf-8"), keep_blank_values=True)
    return {name: _decode(name, value) for name, value in pairs}


class _Handler(BaseHTTPRequestHandler):
    server: _HTTPServer
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        pass  # quiet: the token is in every path

    def do_GET(self) -> None:
        self._serve(b"")

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        self._serve(self.rfile.read(length) if length else b"")

    def _serve(self, body: bytes) -> None:
        path, _, query = self.path.partition("?")
        parts = path.strip("/").split("/")
        if len(parts) != 2 or not parts[0].startswith("bot"):
            self._reply(404, {"ok": False, "error_code": 404, "description": "Not Found"})
            return
        token, method = parts[0][3:], parts[1]
        try:
            params = parse_body(self.headers.get("Content-Type", ""), body)
            if query:
                params = {k: _decode(k, v) for k, v in parse_qsl(query)} | params
        except (ValueError, UnicodeDecodeError):
            self._reply(400, {"ok": False, "error_code": 400, "description": "Bad Request"})
            return
        status, answer = self.server.telegram._handle(token, method, params)
        self._reply(status, answer)

    def _reply(self, status: int, answer: dict) -> None:
        data = json.dumps(answer).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


class _HTTPServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, telegram: FakeTelegram) -> None:
        self.telegram = telegram
        super().__init__(("127.0.0.1", 0), _Handler)
