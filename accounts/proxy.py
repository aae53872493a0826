"""Behind an authenticating proxy (AUTH_PROXY_HEADER): the person the proxy names is signed in,
their account made on first sight (accounts.services.user_proxy_get_or_create). The middleware
(web.middleware.TrustedProxyUserMiddleware) calls this backend only for a request that came
straight from one of AUTH_PROXY_ADDRESSES; from anywhere else the header means nothing."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.backends import ModelBackend
from django.http import HttpRequest

from core.errors import InvalidInput

from .backends import approval_refusal
from .models import User
from .services import user_proxy_get_or_create

PROXY_BACKEND = "accounts.proxy.ProxyHeaderBackend"


class ProxyHeaderBackend(ModelBackend):
    def authenticate(
        self,
        request: HttpRequest | None,
        username: str | None = None,
        password: str | None = None,
        **kwargs: Any,
    ) -> User | None:
        """The account the proxy names (`proxy_username`, only the middleware passes it); None
        for a name that is no valid username or an account turned off; AccountNotApproved for
        one that waits or was refused."""
        proxy_username = kwargs.get("proxy_username")
        if not isinstance(proxy_username, str) or username is not None:
            return None
        try:
            user = user_proxy_get_or_create(username=proxy_username)
        except InvalidInput:
            return None
        if self.user_can_authenticate(user):
            return user
        refusal = approval_refusal(user)
        if refusal is not None:
            raise refusal
        return None
