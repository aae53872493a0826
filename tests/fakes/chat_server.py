"""A real local HTTP server that speaks the OpenAI Chat Completions protocol, for tests.

Standard library only. Script the answers with `queue(...)`; every request body is recorded in
`requests` before it is answered::

    with FakeChatServer().start() as server:
        server.queue(Reply("Hello there"), ToolCalls([ToolCall("lookup", {"q": "x"})]))
        client = openai.OpenAI(base_url=server.base_url, api_key="test", max_retries=0)
        ...

Streaming answers use HTTP/1.1 chunked transfer encoding (and `Connection: close`), so a stream
cut short by `Drop` is an incomplete body the client notices, not a clean end of stream.
"""

from __future__ import annotations

import itertools
import json
import math
import re
import sys
import threading
import time
import traceback
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlsplit

__all__ = [
    "Drop",
    "Error",
    "FakeChatServer",
    "Garbage",
    "Hang",
    "Reply",
    "StreamError",
    "ToolCall",
    "ToolCalls",
]

DEFAULT_MODEL = "fake-model"


@dataclass
class Reply:
    """A plain assistant answer."""

    text: str
    chunk_size: int = 1  # when streaming: words (split on spaces, keeping them) per SSE chunk
    delay: float = 0.0  # seconds to sleep between streamed chunks
    prompt_tokens: int = 11
    completion_tokens: int = 7
    finish_reason: str = "stop"  # "length": the server stopped it at max_tokens
    reasoning: str = ""  # when streaming: sent first, word by word, as `reasoning_content` deltas
    role_only: bool = False  # when streaming: the first chunk is {"role": "assistant"}, no content
    finish: bool = True  # when streaming: False ends the stream cleanly with no finish chunk
    done: bool = True  # when streaming: False leaves out the final `data: [DONE]`


@dataclass
class ToolCall:
    """One tool call the model asks for."""

    name: str
    arguments: dict | str  # a dict is JSON-encoded; a str is sent verbatim (may be broken JSON)
    id: str | None = None  # default: "call_<n>", unique per server


@dataclass
class ToolCalls:
    """An assistant message with one or more tool calls, optionally with some text."""

    calls: list[ToolCall]
    text: str = ""
    prompt_tokens: int = 11
    completion_tokens: int = 7
    # When streaming: characters of a call's arguments per chunk (0: the arguments in two halves).
    arg_chunk: int = 0
    finish: bool = True  # when streaming: False ends the stream cleanly with no finish chunk
    done: bool = True  # when streaming: False leaves out the final `data: [DONE]`


@dataclass
class Error:
    """An HTTP error answer with an OpenAI-shaped body."""

    status: int = 500
    message: str = "injected failure"
    retry_after_ms: int | None = 10  # `retry-after-ms` / `retry-after` headers: fast client retries
    code: str | None = None  # the body's `code` (default: by status): "context_length_exceeded"
    # More headers, sent as given: how other servers and gateways say when to retry, e.g.
    # {"llm_provider-retry-after": "2"} (LiteLLM), {"x-ratelimit-reset-requests": "1.5s",
    # "x-ratelimit-remaining-requests": "0"} (OpenAI). Use retry_after_ms=None to send only these.
    headers: dict[str, str] | None = None


@dataclass
class Hang:
    """Accept the request, answer nothing for `seconds`, then close the connection."""

    seconds: float = 5.0


@dataclass
class Garbage:
    """A 200 whose body breaks the protocol: invalid JSON, or `data:` lines that are not JSON."""

    body: str = "this is not json"


@dataclass
class Drop:
    """Streaming: send `after_chunks` content chunks of `text`, then close without finishing.
    Not streaming: close the connection without any response."""

    text: str = "partial answer that never"
    after_chunks: int = 2


@dataclass
class StreamError:
    """Streaming: send `after_chunks` content chunks of `text`, then an explicit error event,
    `data: {"error": {"message", "type", "param", "code"}}`, as LiteLLM and OpenRouter do when
    the upstream fails mid-stream, and end the stream (no finish chunk, no [DONE]). With
    `in_chunk`, the error rides in a chunk that also has a choice with finish_reason "error"
    (OpenRouter's shape). Not streaming: a 500 with the same error body."""

    message: str = "the upstream failed mid-stream"
    text: str = "partial answer that never"
    after_chunks: int = 2
    type: str = "server_error"
    code: str | int | None = None
    in_chunk: bool = False


_ITEM_TYPES = (Reply, ToolCalls, Error, Hang, Garbage, Drop, StreamError)

_ERROR_KINDS: dict[int, tuple[str, str | None]] = {
    400: ("invalid_request_error", None),
    401: ("invalid_request_error", "invalid_api_key"),
    403: ("permission_error", None),
    404: ("invalid_request_error", "not_found"),
    409: ("invalid_request_error", "conflict"),
    422: ("invalid_request_error", None),
    429: ("requests", "rate_limit_exceeded"),
}


def error_body(status: int, message: str, code: str | None = None) -> dict[str, Any]:
    """OpenAI's error shape: {"error": {"message", "type", "param", "code"}}."""
    kind, default_code = _ERROR_KINDS.get(status, ("server_error", None))
    code = code or default_code
    if status < 500 and status not in _ERROR_KINDS:
        kind = "invalid_request_error"
    return {"error": {"message": message, "type": kind, "param": None, "code": code}}


def split_words(text: str, per_chunk: int = 1) -> list[str]:
    """Split `text` into pieces of `per_chunk` words; the spaces stay attached, so the pieces
    concatenate back to `text`."""
    words = [w for w in re.split(r"(?<= )(?=[^ ])", text) if w]
    size = max(1, per_chunk)
    return ["".join(words[i : i + size]) for i in range(0, len(words), size)]


def last_user_text(body: dict) -> str:
    """The text of the last user message (content string, or the text parts of a list)."""
    for message in reversed(body.get("messages") or []):
        if not isinstance(message, dict) or message.get("role") != "user":
            continue
        content = message.get("content")
        if isinstance(content, str):
            return content
        if isinstance(content, list):
            return "".join(
                part.get("text", "")
                for part in content
                if isinstance(part, dict) and part.get("type") == "text"
            )
        return ""
    return ""


def echo(body: dict) -> Reply:
    """The default answer: `Reply("Echo: <last user message>")`."""
    return Reply(f"Echo: {last_user_text(body)}")


__all__ += ["count_tokens"]


class FakeChatServer:
    """OpenAI-compatible chat completions server on 127.0.0.1, answering scripted items."""

    def __init__(
        self, context_window: int | None = None, aside: Callable[[dict], Any] | None = None
    ) -> None:
        # With a window, the server counts each request's tokens (count_tokens) as a real one
        # would, refuses one that does not fit with OpenAI's 400 `context_length_exceeded`, and
        # reports the count as the usage's prompt_tokens.
        self.context_window = context_window
        # How many characters the server's tokenizer makes a token (count_tokens): fewer for a
        # denser tokenizer (code, numbers, many languages), which counts more tokens.
        self.chars_per_token: float = 4
        self.requests: list[dict] = []
        # When each request of `requests` arrived (time.monotonic()): the waits between retries.
        self.request_times: list[float] = []
        # Streams whose client went away before the stream ended (it closed the connection).
        self.abandoned = 0
        self.default: Callable[[dict], Any] = echo
        # Answers some requests on the side (say, the small titling request an app makes after
        # a turn): an item for a request answers it, None leaves it to the queue. Requests it
        # answers are recorded in `aside_requests`, not `requests`, and take no queued item.
        self.aside: Callable[[dict], Any] | None = aside
        self._aside = aside
        self.aside_requests: list[dict] = []
        self._queue: deque[Any] = deque()
        self._lock = threading.Lock()
        self._counter = itertools.count(1)
        self._stopping = threading.Event()
        self._httpd: _HTTPServer | None = None
        self._thread: threading.Thread | None = None

    # lifecycle -------------------------------------------------------------------------------

    def start(self) -> FakeChatServer:
        if self._httpd is not None:
            return self
        self._stopping.clear()
        self._httpd = _HTTPServer(self)
        self._thread = threading.Thread(
            target=self._httpd.serve_forever,
            kwargs={"poll_interval": 0.05},
            name=f"FakeChatServer:{self.port}",
            daemon=True,
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        httpd, thread = self._httpd, self._thread
        if httpd is None:
            return
        self._stopping.set()  # wakes Hang and delayed streams
        httpd.shutdown()
        httpd.server_close()
        if thread is not None:
            thread.join(timeout=5)
        self._httpd = self._thread = None

    def __enter__(self) -> FakeChatServer:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    @property
    def port(self) -> int:
        if self._httpd is None:
            raise RuntimeError("FakeChatServer is not started")
        return self._httpd.server_address[1]

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    # scripting -------------------------------------------------------------------------------

    def queue(self, *items: Any) -> None:
        """Script the next answers, one item per chat request, first in first out. An item is a
        Reply/ToolCalls/Error/Hang/Garbage/Drop/StreamError, a str (shorthand for Reply), or a
        callable(request_body) -> item evaluated when the request arrives (None: use default)."""
        with self._lock:
            self._queue.extend(items)

    def reset(self) -> None:
        with self._lock:
            self._queue.clear()
            self.requests.clear()
            self.request_times.clear()
            self.aside_requests.clear()
            self.aside = self._aside
            self.abandoned = 0
            self.context_window = None
            self.chars_per_token = 4
            self.default = echo

    @property
    def pending(self) -> int:
        """How many queued items have not been used yet."""
        with self._lock:
            return len(self._queue)

    def messages(self, i: int = -1) -> list[dict]:
        return self.requests[i]["messages"]

    # internals -------------------------------------------------------------------------------

    def _next_id(self, prefix: str) -> str:
        return f"{prefix}{next(self._counter)}"

    def _take(self, body: dict) -> Any:
        """Record the request and return the (unresolved) item that answers it."""
        side = self.aside(body) if self.aside is not None else None
        with self._lock:
            if side is not None:
                self.aside_requests.append(body)
                return side
            self.requests.append(body)
            self.request_times.append(time.monotonic())
            return self._queue.popleft() if self._queue else None

    def _resolve(self, item: Any, body: dict) -> Any:
        for _ in range(20):
            if isinstance(item, _ITEM_TYPES):
                return item
            if isinstance(item, str):
                return Reply(item)
            if item is None:
                item = self.default(body)
                if item is None:
                    raise TypeError("FakeChatServer.default returned None")
            elif callable(item):
                item = item(body)
            else:
                break
        raise TypeError(f"FakeChatServer cannot answer with {item!r}")


class _HTTPServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, fake: FakeChatServer) -> None:
        self.fake = fake
        super().__init__(("127.0.0.1", 0), _Handler)

    def handle_error(self, request: Any, client_address: Any) -> None:
        if isinstance(sys.exc_info()[1], ConnectionError | TimeoutError):
            return  # the client went away: not our problem
        super().handle_error(request, client_address)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _HTTPServer

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def handle(self) -> None:
        try:
            super().handle()
        except ConnectionError:  # BrokenPipe, ConnectionReset, ConnectionAborted
            self.close_connection = True

    @property
    def fake(self) -> FakeChatServer:
        return self.server.fake

    # routing ---------------------------------------------------------------------------------

    def do_GET(self) -> None:
        path = urlsplit(self.path).path.rstrip("/")
        if path == "/v1/models":
            self._send_json(200, {"object": "list", "data": [_model_object(DEFAULT_MODEL)]})
        elif path.startswith("/v1/models/"):
            self._send_json(200, _model_object(path.removeprefix("/v1/models/")))
        else:
            self._not_found()

    def do_POST(self) -> None:
        raw = self._read_body()
        if urlsplit(self.path).path.rstrip("/") != "/v1/chat/completions":
            self._not_found()
            return
        try:
            body = json.loads(raw or b"null")
        except ValueError as exc:
            self._send_error(400, f"We could not parse the JSON body of your request: {exc}")
            return
        if not isinstance(body, dict):
            self._send_error(400, "The request body must be a JSON object.")
            return
        item = self.fake._take(body)
        window = self.fake.context_window
        prompt = count_tokens(body, self.fake.chars_per_token)
        if window is not None:
            completion = body.get("max_tokens") or body.get("max_completion_tokens") or 0
            if prompt + completion > window:
                self._send_error(
                    400,
                    f"This model's maximum context length is {window} tokens. However, you "
                    f"requested {prompt + completion} tokens ({prompt} in the messages, "
                    f"{completion} in the completion). Please reduce the length of the messages "
                    "or completion.",
                    retry=False,
                    code="context_length_exceeded",
                )
                return
        try:
            item = self.fake._resolve(item, body)
        except Exception as exc:
            traceback.print_exc()
            self._send_error(500, f"FakeChatServer: scripted item failed: {exc!r}", retry=False)
            return
        if window is not None and isinstance(item, Reply | ToolCalls):
            item.prompt_tokens = prompt
        self._answer(item, body)

    def do_DELETE(self) -> None:
        self._read_body()
        self._not_found()

    do_PUT = do_PATCH = do_DELETE

    def _not_found(self) -> None:
        self._send_error(404, f"Unknown request URL: {self.command} {self.path}.", retry=False)

    # answering -------------------------------------------------------------------------------

    def _answer(self, item: Any, body: dict) -> None:
        stream = bool(body.get("stream"))
        if isinstance(item, Error):
            self._send_error(
                item.status,
                item.message,
                retry_after_ms=item.retry_after_ms,
                code=item.code,
                headers=item.headers,
            )
        elif isinstance(item, StreamError) and not stream:
            self._send_json(500, {"error": _stream_error(item)})
        elif isinstance(item, Hang):
            self.fake._stopping.wait(item.seconds)
            self.close_connection = True
        elif isinstance(item, Garbage):
            self._send_garbage(item, stream)
        elif isinstance(item, Drop):
            if stream:
                self._send_stream(item, body)
            self.close_connection = True
        elif stream:
            self._send_stream(item, body)
        else:
            self._send_json(200, self._completion(item, body))

    def _completion(self, item: Reply | ToolCalls, body: dict) -> dict[str, Any]:
        message: dict[str, Any] = {"role": "assistant", "content": item.text, "refusal": None}
        finish_reason = item.finish_reason if isinstance(item, Reply) else "stop"
        if isinstance(item, ToolCalls):
            message["content"] = item.text or None
            message["tool_calls"] = [
                {
                    "id": call_id,
                    "type": "function",
                    "function": {"name": call.name, "arguments": arguments},
                }
                for call, call_id, arguments in self._calls(item)
            ]
            finish_reason = "tool_calls"
        return {
            "id": self.fake._next_id("chatcmpl-fake"),
            "object": "chat.completion",
            "created": int(time.time()),
            "model": body.get("model") or DEFAULT_MODEL,
            "system_fingerprint": "fp_fake",
            "choices": [
                {
                    "index": 0,
                    "message": message,
                    "logprobs": None,
                    "finish_reason": finish_reason,
                }
            ],
            "usage": _usage(item),
        }

    def _calls(self, item: ToolCalls) -> list[tuple[ToolCall, str, str]]:
        out = []
        for call in item.calls:
            call_id = call.id or self.fake._next_id("call_")
            arguments = (
                call.arguments if isinstance(call.arguments, str) else json.dumps(call.arguments)
            )
            out.append((call, call_id, arguments))
        return out

    def _stream_deltas(
        self, item: Reply | ToolCalls | Drop | StreamError
    ) -> tuple[list[dict[str, Any]], float]:
        """The deltas of a streamed answer, before its finish, and the delay between them."""
        if isinstance(item, Drop | StreamError):
            pieces = split_words(item.text)[: max(0, item.after_chunks)]
            return [{"role": "assistant", "content": ""}, *({"content": p} for p in pieces)], 0.0
        if isinstance(item, Reply):
            deltas: list[dict[str, Any]] = [
                {"role": "assistant"} if item.role_only else {"role": "assistant", "content": ""}
            ]
            if item.reasoning:
                deltas.extend({"reasoning_content": p} for p in split_words(item.reasoning))
            deltas.extend({"content": p} for p in split_words(item.text, item.chunk_size))
            return deltas, item.delay
        return self._tool_call_deltas(item), 0.0

    def _tool_call_deltas(self, item: ToolCalls) -> list[dict[str, Any]]:
        """The deltas of tool calls: each call's head, then its arguments in pieces."""
        deltas: list[dict[str, Any]] = [{"role": "assistant", "content": "" if item.text else None}]
        if item.text:
            deltas.append({"content": item.text})
        for index, (call, call_id, arguments) in enumerate(self._calls(item)):
            head = {"index": index, "id": call_id, "type": "function"}
            head["function"] = {"name": call.name, "arguments": ""}
            deltas.append({"tool_calls": [head]})
            size = item.arg_chunk or (len(arguments) + 1) // 2 or 1
            parts = [arguments[i : i + size] for i in range(0, len(arguments), size)] or [""]
            deltas.extend(
                {"tool_calls": [{"index": index, "function": {"arguments": part}}]}
                for part in parts
            )
        return deltas

    def _send_stream(self, item: Reply | ToolCalls | Drop | StreamError, body: dict) -> None:
        completion_id = self.fake._next_id("chatcmpl-fake")
        created = int(time.time())
        model = body.get("model") or DEFAULT_MODEL

        def chunk(delta: dict, finish_reason: str | None = None) -> dict[str, Any]:
            return {
                "id": completion_id,
                "object": "chat.completion.chunk",
                "created": created,
                "model": model,
                "system_fingerprint": "fp_fake",
                "choices": [
                    {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish_reason}
                ],
            }

        deltas, delay = self._stream_deltas(item)
        self._start_stream()
        try:
            for n, delta in enumerate(deltas):
                if n and delay and self.fake._stopping.wait(delay):
                    return  # server stopping: abandon the stream
                self._send_event(chunk(delta))
        except ConnectionError:
            with self.fake._lock:
                self.fake.abandoned += 1
            raise
        if isinstance(item, Drop):
            return  # no finish chunk, no [DONE], no terminating 0-length chunk
        if isinstance(item, StreamError):
            event: dict[str, Any] = {"error": _stream_error(item)}
            if item.in_chunk:
                event = {**chunk({"content": ""}, "error"), **event}
            self._send_event(event)
            self._end_stream()
            return
        if delay and self.fake._stopping.wait(delay):
            return
        if item.finish:
            self._send_event(
                chunk({}, "tool_calls" if isinstance(item, ToolCalls) else item.finish_reason)
            )
        if item.finish and (body.get("stream_options") or {}).get("include_usage"):
            usage_chunk = chunk({})
            usage_chunk["choices"] = []
            usage_chunk["usage"] = _usage(item)
            self._send_event(usage_chunk)
        if item.done:
            self._send_event("[DONE]")
        self._end_stream()  # a clean end of the body, [DONE] or not

    def _send_garbage(self, item: Garbage, stream: bool) -> None:
        if not stream:
            self._send_raw(200, item.body.encode(), "application/json")
            return
        self._start_stream()
        self._write_chunk(
            "".join(f"data: {line}\n" for line in item.body.split("\n")).encode() + b"\n"
        )
        self._send_event("[DONE]")
        self._end_stream()

    # HTTP plumbing ---------------------------------------------------------------------------

    def _read_body(self) -> bytes:
        if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
            parts = []
            while True:
                size_line = self.rfile.readline()
                size = int(size_line.split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass  # trailers
                    return b"".join(parts)
                parts.append(self.rfile.read(size))
                self.rfile.readline()
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length > 0 else b""

    def _common_headers(self) -> None:
        self.send_header("Connection", "close")
        self.send_header("x-request-id", self.fake._next_id("req_fake"))

    def _send_raw(
        self,
        status: int,
        data: bytes,
        content_type: str,
        headers: dict[str, str] | None = None,
    ) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        self._common_headers()
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)

    def _send_json(self, status: int, payload: Any, headers: dict[str, str] | None = None) -> None:
        self._send_raw(status, json.dumps(payload).encode(), "application/json", headers)

    def _send_error(
        self,
        status: int,
        message: str,
        retry_after_ms: int | None = None,
        retry: bool = True,
        code: str | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        headers = dict(headers or {})
        if retry_after_ms is not None:
            headers["retry-after-ms"] = str(retry_after_ms)
            headers["retry-after"] = str(-(-retry_after_ms // 1000))  # whole seconds, rounded up
        if not retry:
            headers["x-should-retry"] = "false"
        self._send_json(status, error_body(status, message, code), headers)

    def _start_stream(self) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream; charset=utf-8")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Transfer-Encoding", "chunked")
        self._common_headers()
        self.end_headers()

    def _write_chunk(self, data: bytes) -> None:
        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))

    def _send_event(self, payload: dict | str) -> None:
        data = payload if isinstance(payload, str) else json.dumps(payload)
        self._write_chunk(f"data: {data}\n\n".encode())

    def _end_stream(self) -> None:
        self.wfile.write(b"0\r\n\r\n")


def count_tokens(body: dict, chars_per_token: float = 4) -> int:
    """A request's tokens as this server counts them: four characters (or `chars_per_token`)
    of text, tool calls and tool schemas to a token, and four tokens of framing per message."""
    chars = 0
    messages = body.get("messages") or []
    for m in messages:
        content = m.get("content") if isinstance(m, dict) else None
        if isinstance(content, str):
            chars += len(content)
        elif content is not None:
            chars += len(json.dumps(content))
        if isinstance(m, dict) and m.get("tool_calls"):
            chars += len(json.dumps(m["tool_calls"]))
    if body.get("tools"):
        chars += len(json.dumps(body["tools"]))
    return math.ceil(chars / chars_per_token) + 4 * len(messages)


def _stream_error(item: StreamError) -> dict[str, Any]:
    return {"message": item.message, "type": item.type, "param": None, "code": item.code}


def _model_object(model_id: str) -> dict[str, Any]:
    return {"id": model_id, "object": "model", "created": 0, "owned_by": "fake"}


def _usage(item: Reply | ToolCalls) -> dict[str, int]:
    return {
        "prompt_tokens": item.prompt_tokens,
        "completion_tokens": item.completion_tokens,
        "total_tokens": item.prompt_tokens + item.completion_tokens,
    }
