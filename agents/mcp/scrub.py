"""An MCP server's own credentials, taken out of what it says before anything keeps or shows it.

A server may echo what it was sent: a header value (`Authorization: Bearer ...`), a token in its
URL's query, the password in its URL. Its results, its errors and the notice of a failed listing
are scrubbed of those values before they are stored, shown, exported or sent to the model: each
occurrence becomes `[redacted]`.

What counts as a secret of a server (`secrets_of`): each header value; for a value of the form
`<scheme> <credentials>` (`Bearer abc`, `Basic dXNlcjpwYXNz`) the credentials alone too, and
for Basic, the decoded `user:password` and password; each query value of the URL; the URL's
password and `user:password`. Each is looked for as written and in the variants a server is
likely to echo it in: percent-encoded (either case of hex digits, `+` or `%20` for a space) and
as it reads inside a JSON string.

Values shorter than MIN_SECRET (6) characters are not scrubbed: `?format=json`, `?v=2`,
`?lang=en-US`, `X-Debug: true` are ordinary words and numbers, and replacing every "json" or "2"
in a result would garble it, while a credential that short is no secret anyway (it is guessed in
seconds).
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from collections.abc import Iterable
from urllib.parse import parse_qsl, quote, quote_plus, unquote, urlsplit

MARKER = "[redacted]"
MIN_SECRET = 6


def _variants(secret: str) -> set[str]:
    escaped_json = json.dumps(secret)[1:-1]
    encoded = {quote(secret, safe=""), quote_plus(secret), quote(secret, safe="/:@")}
    lower = {re.sub(r"%[0-9A-F]{2}", lambda m: m.group(0).lower(), e) for e in encoded}
    return {secret, escaped_json, *encoded, *lower}


def _of_header(value: str) -> list[str]:
    found = [value]
    scheme, _, credentials = value.strip().partition(" ")
    credentials = credentials.strip()
    if not credentials:
        return found
    found.append(credentials)
    if scheme.lower() == "basic":
        try:
            decoded = base64.b64decode(credentials, validate=True).decode()
        except (binascii.Error, UnicodeDecodeError):
            return found
        found.append(decoded)
        found.append(decoded.partition(":")[2])
    return found


def _of_url(url: str) -> list[str]:
    parts = urlsplit(url)
    found = [value for _, value in parse_qsl(parts.query, keep_blank_values=True)]
    found += [raw.partition("=")[2] for raw in parts.query.split("&")]  # as written
    if parts.password:
        found += [unquote(parts.password), parts.password]
        found.append(f"{unquote(parts.username or '')}:{unquote(parts.password)}")
    return found


def secrets_of(url: str, headers: dict[str, str]) -> list[str]:
    """Every value of a server's configuration that must not come back out of it."""
    found = [s for value in headers.values() for s in _of_header(value)]
    found += _of_url(url)
    return [s for s in found if len(s) >= MIN_SECRET]


class Scrubber:
    """Replaces every occurrence of the given secrets (and their variants) with MARKER."""

    def __init__(self, secrets: Iterable[str]) -> None:
        forms = {v for s in secrets if len(s) >= MIN_SECRET for v in _variants(s)}
        forms = {f for f in forms if len(f) >= MIN_SECRET}
        # Longest first: a value that contains another is replaced whole.
        ordered = sorted(forms, key=lambda f: (-len(f), f))
        self._pattern = re.compile("|".join(map(re.escape, ordered))) if ordered else None

    def __call__(self, text: str) -> str:
        if self._pattern is None or not text:
            return text
        return self._pattern.sub(MARKER, text)
