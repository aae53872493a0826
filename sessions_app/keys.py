"""Session keys: how an integration (a bot, another service) addresses a conversation by its own
id instead of ours.

A key has the form `agent:<agentId>:<scope>:<chatId>` (seed 001, after OpenClaw):

- `agent` is literal.
- `agentId`: 1 to 64 of `A-Z a-z 0-9 _ . -` (no `:`, so the key splits unambiguously).
- `scope`: exactly one of `main` (one session per chat), `per-peer` (isolated by sender across
  channels) and `per-channel-peer` (isolated by channel and sender). The integration decides
  what its chat id means under each scope; for us the scope is part of the key, so the same chat
  id under two scopes is two sessions.
- `chatId`: 1 to 128 characters, everything after the third `:`, so it may itself hold `:`
  (`telegram:12345`, `@user:matrix.org`), digits only (`12345`, `-100123`) or any other visible
  character. Refused: white space of any kind and every Unicode "other" character (control,
  format such as zero-width and bidirectional marks, surrogates, private use, unassigned:
  categories C* and Z*), so a key always reads as what it is.

The whole key is at most 6 + 64 + 1 + 16 + 1 + 128 = 216 characters. Keys are compared exactly:
case-sensitive, no trimming, no Unicode normalisation. A key belongs to the user who uses it:
two users with the same key each have their own session.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from typing import Any

from sessions_app.errors import InvalidSessionKey

SCOPES = ("main", "per-peer", "per-channel-peer")
AGENT_ID_MAX_LENGTH = 64
CHAT_ID_MAX_LENGTH = 128
SESSION_KEY_MAX_LENGTH = len("agent:") + AGENT_ID_MAX_LENGTH + 1 + 16 + 1 + CHAT_ID_MAX_LENGTH
FORM = (
    "agent:<agentId>:<scope>:<chatId>, where agentId is 1 to 64 letters, digits, '_', '.' or "
    "'-', scope is main, per-peer or per-channel-peer, and chatId is 1 to 128 visible "
    "characters (no spaces or control characters)"
)
_AGENT_ID = re.compile(rf"[A-Za-z0-9_.-]{{1,{AGENT_ID_MAX_LENGTH}}}")


@dataclass(frozen=True)
class SessionKey:
    agent_id: str
    scope: str
    chat_id: str

    def __str__(self) -> str:
        return f"agent:{self.agent_id}:{self.scope}:{self.chat_id}"

    @property
    def default_name(self) -> str:
        """The name a session made for this key starts with: `agent X · scope · chat`, cut to
        the name's limit (200 characters). The user may rename it; the key stays."""
        name = f"{self.agent_id} · {self.scope} · {self.chat_id}"
        return name if len(name) <= 200 else name[:199] + "…"


def _refuse(why: str) -> InvalidSessionKey:
    return InvalidSessionKey(f"Malformed session key: {why}. Expected {FORM}.")


def parse_session_key(value: Any) -> SessionKey:
    """The parts of a session key; InvalidSessionKey (400) saying what is wrong and what form is
    expected for anything else."""
    if not isinstance(value, str):
        raise _refuse("it must be text")
    if len(value) > SESSION_KEY_MAX_LENGTH:
        raise _refuse(f"it is {len(value)} characters long; the limit is {SESSION_KEY_MAX_LENGTH}")
    parts = value.split(":", 3)
    if len(parts) != 4:
        raise _refuse("it must have four parts separated by ':'")
    literal, agent_id, scope, chat_id = parts
    if literal != "agent":
        raise _refuse("it must start with 'agent:'")
    if not _AGENT_ID.fullmatch(agent_id):
        raise _refuse("the agent id must be 1 to 64 letters, digits, '_', '.' or '-'")
    if scope not in SCOPES:
        raise _refuse(f"the scope {scope[:20]!r} is not main, per-peer or per-channel-peer")
    if not chat_id:
        raise _refuse("the chat id is empty")
    if len(chat_id) > CHAT_ID_MAX_LENGTH:
        raise _refuse(f"the chat id is longer than {CHAT_ID_MAX_LENGTH} characters")
    for char in chat_id:
        if unicodedata.category(char)[0] in "CZ":
            raise _refuse(
                f"the chat id holds U+{ord(char):04X}; spaces and control, format or "
                "unassigned characters are not allowed"
            )
    return SessionKey(agent_id, scope, chat_id)


def clean_session_key(value: Any) -> str:
    """A well-formed session key, exactly as given (see `parse_session_key`)."""
    return str(parse_session_key(value))
