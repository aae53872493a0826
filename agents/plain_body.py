"""A streamed chat completion sent without openai's request transform, when its parameters are
plain JSON (what agno sends: dicts, lists, strings, numbers).

openai's `chat.completions.create` passes its whole body through `maybe_transform`, which walks
every value of every message against the parameters' TypedDicts (for aliased keys and formatted
values, of which the chat parameters have none). It costs about 2 ms for three messages and
fifteen tools, and grows with the history: about 26 ms for 131 messages, on every model call of
a turn. For plain JSON that walk changes nothing but leaving out unset parameters, which is
what `PlainCompletions` does, before the same `_post` openai makes; anything else (a pydantic
model, a date, a file, a non-streamed call) goes through openai's own `create`.
`tests/agents/test_plain_body.py` holds the two requests equal (the same JSON and headers).
"""

from __future__ import annotations

import inspect
from functools import cached_property
from typing import Any

from openai import Stream
from openai._base_client import make_request_options
from openai._utils import is_given
from openai.resources.chat import Chat
from openai.resources.chat.completions import Completions
from openai.types.chat import ChatCompletion, ChatCompletionChunk

# The keyword arguments of `create` that are request options, not body; and all it takes (any
# other goes to openai's own, which refuses it).
OPTIONS = ("extra_headers", "extra_query", "extra_body", "timeout")
TAKEN = frozenset(inspect.signature(Completions.create).parameters) - {"self"}


def is_plain(value: object) -> bool:
    """Whether `value` is plain JSON: None, a bool, a number, a string, or lists and dicts (with
    string keys) of those."""
    if value is None or isinstance(value, str | bool | int | float):
        return True
    if isinstance(value, list):
        return all(is_plain(v) for v in value)
    if isinstance(value, dict):
        return all(isinstance(k, str) and is_plain(v) for k, v in value.items())
    return False


class PlainCompletions(Completions):
    def create(self, **params: Any) -> Any:
        options = {name: params.pop(name) for name in OPTIONS if name in params}
        body = {key: value for key, value in params.items() if is_given(value)}
        plain = body.get("stream") is True and "messages" in body and "model" in body
        if not plain or not TAKEN.issuperset(params) or not is_plain(body):
            return super().create(**params, **options)
        return self._post(
            "/chat/completions",
            body=body,
            options=make_request_options(**options, security={"bearer_auth": True}),
            cast_to=ChatCompletion,
            stream=True,
            stream_cls=Stream[ChatCompletionChunk],
        )


class PlainChat(Chat):
    @cached_property
    def completions(self) -> PlainCompletions:
        return PlainCompletions(self._client)
