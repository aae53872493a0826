"""The private methods of openai's and agno's classes that agents.retry and agents.model override
or call. Neither library offers a public hook for them (openai's retry policy is `max_retries`
only; agno builds its clients in `_get_client_params`), so each is held here by its name and
signature: an upgrade that renames or reshapes one fails this test instead of silently bypassing
our override (a renamed `_should_retry` would leave ours uncalled, and the client would retry a
429 that asks for an hour)."""

from __future__ import annotations

import inspect

import pytest
from agno.models.openai.chat import OpenAIChat
from agno.models.openai.like import OpenAILike
from openai._base_client import AsyncAPIClient, SyncAPIClient

from agents.model import ChatModel
from agents.retry import AsyncClient, Client, _RetryAfter


def parameters(function: object) -> list[str]:
    return list(inspect.signature(function).parameters)  # type: ignore[arg-type]


@pytest.mark.parametrize("base", [SyncAPIClient, AsyncAPIClient])
def test_openai_decides_a_retry_in_should_retry_of_the_response(base):
    assert parameters(base._should_retry) == ["self", "response"]
    # The client calls it, by that name, when a request fails with a response.
    assert "self._should_retry(" in inspect.getsource(base)


@pytest.mark.parametrize("base", [SyncAPIClient, AsyncAPIClient])
def test_openai_asks_calculate_retry_timeout_how_long_to_wait(base):
    hook = base._calculate_retry_timeout
    assert parameters(hook) == ["self", "remaining_retries", "options", "response_headers"]
    assert inspect.signature(hook).parameters["response_headers"].default is None
    assert "self._calculate_retry_timeout(" in inspect.getsource(base)


@pytest.mark.parametrize("client", [Client, AsyncClient])
def test_our_retry_policy_comes_before_openais_in_the_clients(client):
    mro = client.__mro__
    assert mro.index(_RetryAfter) < mro.index(SyncAPIClient if client is Client else AsyncAPIClient)
    for name in ("_should_retry", "_calculate_retry_timeout"):
        assert getattr(client, name) is getattr(_RetryAfter, name)


def test_agno_builds_its_clients_from_get_client_params():
    assert parameters(OpenAIChat._get_client_params) == ["self"]
    # agno's own clients are made from it, as shared_client and get_async_client make ours.
    source = inspect.getsource(OpenAIChat)
    assert "self._get_client_params()" in source
    assert "def get_async_client(self)" in source
    assert "async_client" in OpenAILike.__dataclass_fields__


def test_agno_parses_each_streamed_chunk_in_parse_provider_response_delta():
    assert parameters(OpenAIChat._parse_provider_response_delta) == ["self", "response_delta"]
    assert "self._parse_provider_response_delta(" in inspect.getsource(OpenAIChat)
    assert ChatModel._parse_provider_response_delta is not OpenAIChat._parse_provider_response_delta


def test_mcp_makes_its_http_client_in_a_private_module():
    """agents.mcp.client opens its MCP connections with the SDK's own client factory (its
    defaults: redirects followed, the SDK's timeouts), which the SDK keeps in a private module."""
    from mcp.shared._httpx_utils import create_mcp_http_client

    assert parameters(create_mcp_http_client) == ["headers", "timeout", "auth"]
