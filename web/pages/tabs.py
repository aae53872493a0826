"""One rendering of the chat page is a tab. The page tags each of its requests with its tab's id
(`X-Rollback-Tab`) and with what its panels show (`X-Rollback-View`: the checkpoint filter, how
many checkpoints are loaded, the open file), both set by live.js. A view whose answer shows the
page its new state names its tab as the one acting (`answers_with_new_state`, core.origin): the
events it publishes carry that tab's id, and that tab's socket does not have it fetch again what
its answer brought (web.ws.consumers)."""

from __future__ import annotations

import functools
import secrets
from collections.abc import Callable
from dataclasses import dataclass
from typing import Concatenate, ParamSpec, TypeVar

from django.http import HttpRequest, HttpResponse, QueryDict

from core.errors import InvalidInput
from core.origin import acting_tab
from web import chat_state as pages

P = ParamSpec("P")
R = TypeVar("R", bound=HttpRequest)

TAB_HEADER = "X-Rollback-Tab"
VIEW_HEADER = "X-Rollback-View"


def new_tab_id() -> str:
    """The id of one rendering of the chat page (a tab), for its socket and its requests."""
    return secrets.token_hex(8)


@dataclass(frozen=True)
class PageView:
    """What a tab's panels show, which its refresh keeps: the checkpoint list's filter and how
    many rows it holds, and the file open in the Files panel (its path and the version shown)."""

    checkpoints: pages.CheckpointFilter
    shown: int
    open_path: str
    open_sha: str

    @classmethod
    def of(cls, request: HttpRequest) -> PageView:
        """From the request's `X-Rollback-View` header (a query string); a header that does not
        parse stands for the panels' defaults, like a page just loaded."""
        data = QueryDict(request.headers.get(VIEW_HEADER, "")[:4000])
        try:
            chosen = pages.CheckpointFilter.parse(data)
        except InvalidInput:
            chosen = pages.CheckpointFilter()
        raw = data.get("shown", "")
        shown = int(raw) if raw.isdigit() and len(raw) <= 6 else 0
        return cls(chosen, shown, data.get("open", ""), data.get("open_sha", ""))


def answers_with_new_state(
    view: Callable[Concatenate[R, P], HttpResponse],
) -> Callable[Concatenate[R, P], HttpResponse]:
    """For a view whose answer shows the page its new state (the refresh): the changes it makes
    are its tab's (`X-Rollback-Tab`), whose socket then leaves their events' refresh out."""

    @functools.wraps(view)
    def wrapper(request: R, /, *args: P.args, **kwargs: P.kwargs) -> HttpResponse:
        with acting_tab(request.headers.get(TAB_HEADER)):
            return view(request, *args, **kwargs)

    return wrapper
