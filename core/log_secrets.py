"""No log line of the HTTP clients (httpx, httpx2, httpcore), the MCP SDK or our MCP code shows
a URL's query, a URL's password, or a header value.

An MCP server's URL may carry a token in its query (`?key=...`) and httpx logs every request's
URL at INFO; the SDK logs the URL it connects to at DEBUG; a failure's traceback may quote either.
`install()` (once per process, from AgentsConfig.ready) wraps the LogRecord factory: a record of
one of those loggers has its message, and its traceback's text, cleaned when it is made, before
any handler (ours, pytest's, a third party's) sees it:

- each URL's query values and password become `***` (`mask_url`, also what the admin, the API
  and the errors show of a server's URL), and so does the value of any `?key=value` after a path;
- each value the MCP code sends as a header (`remember`: the operator's and the users' own, the
  most recent MAX_REMEMBERED) becomes `[redacted]`, and so does the value of a header that carries
  credentials by its name (Authorization, Cookie, X-Api-Key, ...) wherever the line quotes one.
"""

from __future__ import annotations

import logging
import re
import threading
from collections.abc import Iterable
from typing import Any
from urllib.parse import urlsplit, urlunsplit

MASK = "***"
MARKER = "[redacted]"
MIN_SECRET = 6
MAX_REMEMBERED = 2000
# The loggers whose records are cleaned: by their first dotted part, and a few of ours.
ROOTS = frozenset(
    {"httpx", "httpx2", "httpcore", "httpcore2", "h11", "mcp", "uvicorn", "sse_starlette"}
)
OURS = ("agents.mcp",)

_URL = re.compile(r"\b[A-Za-z][A-Za-z0-9+.-]*://[^\s'\"<>]+")
_QUERY = re.compile(r"\?([^\s'\"<>#]*=[^\s'\"<>#]*)")
_CREDENTIAL_HEADERS = (
    r"authorization|proxy-authorization|cookie|set-cookie|x-api-key|api-key|x-auth-token|"
    r"x-access-token|private-token"
)
# `Authorization: Bearer x`, `'authorization': 'Bearer x'`, `(b'authorization', b'Bearer x')`.
_HEADER_VALUE = re.compile(
    rf"(?i)(\b(?:{_CREDENTIAL_HEADERS})\b['\"]?\s*[:=,]\s*b?['\"]?)([^'\"\r\n)]+)"
)

_lock = threading.Lock()
_remembered: dict[str, None] = {}
_pattern: re.Pattern[str] | None = None
_installed = False


def _masked_query(query: str) -> str:
    parts = []
    for item in query.split("&"):
        key, sep, _ = item.partition("=")
        parts.append(f"{key}={MASK}" if sep else item)
    return "&".join(parts)


def mask_url(url: str) -> str:
    """The URL with each query value and any password shown as `***` (keys and path kept)."""
    try:
        parts = urlsplit(url)
        netloc = parts.netloc
        if parts.password is not None or "@" in netloc:
            userinfo, _, host = netloc.rpartition("@")
            user = userinfo.partition(":")[0]
            netloc = f"{user}:{MASK}@{host}" if ":" in userinfo else f"{MASK}@{host}"
        query = _masked_query(parts.query) if parts.query else ""
        return urlunsplit((parts.scheme, netloc, parts.path, query, ""))
    except ValueError:
        return url.split("?", 1)[0].split("#", 1)[0]


def remember(values: Iterable[str]) -> None:
    """Values that no cleaned log line may show (a header's value, and its credentials alone:
    the part after `Bearer `)."""
    global _pattern
    fresh: list[str] = []
    for value in values:
        fresh.append(value)
        fresh.append(value.strip().partition(" ")[2].strip())
    fresh = [v for v in fresh if len(v) >= MIN_SECRET and v not in _remembered]
    if not fresh:
        return
    with _lock:
        for value in fresh:
            _remembered[value] = None
        while len(_remembered) > MAX_REMEMBERED:
            del _remembered[next(iter(_remembered))]
        ordered = sorted(_remembered, key=len, reverse=True)
        _pattern = re.compile("|".join(map(re.escape, ordered)))


def clean(text: str) -> str:
    """`text` as a cleaned log line shows it."""
    pattern = _pattern
    if pattern is not None:
        text = pattern.sub(MARKER, text)
    text = _URL.sub(lambda m: mask_url(m.group(0)), text)
    text = _QUERY.sub(lambda m: "?" + _masked_query(m.group(1)), text)
    return _HEADER_VALUE.sub(lambda m: m.group(1) + MARKER, text)


def concerns(name: str) -> bool:
    return name.partition(".")[0] in ROOTS or name.startswith(OURS)


_formatter = logging.Formatter()


def clean_record(record: logging.LogRecord) -> None:
    try:
        message = record.getMessage()
    except Exception:  # a bad format string: logging reports it as it would
        return
    cleaned = clean(message)
    if cleaned != message:
        record.msg, record.args = cleaned, None
    if record.exc_info and not record.exc_text:
        record.exc_text = clean(_formatter.formatException(record.exc_info))
    elif record.exc_text:
        record.exc_text = clean(record.exc_text)
    if record.stack_info:
        record.stack_info = clean(record.stack_info)


def install() -> None:
    """Wrap the LogRecord factory (once per process)."""
    global _installed
    with _lock:
        if _installed:
            return
        previous = logging.getLogRecordFactory()

        def factory(*args: Any, **kwargs: Any) -> logging.LogRecord:
            record = previous(*args, **kwargs)
            if concerns(record.name):
                clean_record(record)
            return record

        logging.setLogRecordFactory(factory)
        _installed = True
