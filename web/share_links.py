"""A share link's address, as the API and the pages both show it (web.api.shares,
web.pages.shares): absolute, built from the request's own host."""

from __future__ import annotations

from django.http import HttpRequest
from django.urls import reverse

from sharing.models import ShareLink
from sharing.selectors import share_token


def shared_url(request: HttpRequest, token: str) -> str:
    return request.build_absolute_uri(reverse("shared", kwargs={"token": token}))


def share_url(request: HttpRequest, share: ShareLink) -> str | None:
    """The link's address; None when it can no longer be shown (the server's SECRET_KEY
    changed since the link was made: the link still works for those who have it)."""
    token = share_token(share)
    return shared_url(request, token) if token is not None else None
