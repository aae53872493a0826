"""What a user may do (`allowance_for`), and the checks every door makes with it."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from django.conf import settings

from core.model_choice import DEMO_MODEL_ID, allowed_models, is_demo

from .cache import group_ids, rules
from .errors import ModelNotAllowed, sharing_denied
from .models import AccessRule

if TYPE_CHECKING:
    from django.contrib.auth.models import AnonymousUser

    from accounts.models import User


@dataclass(frozen=True)
class Allowance:
    """What one user may do: `models` and `tools` None for all of them."""

    models: frozenset[str] | None = None
    tools: frozenset[str] | None = None
    may_share: bool = True
    may_use_shell: bool = True
    may_use_api: bool = True

    def allows_model(self, model: str) -> bool:
        return self.models is None or model in self.models

    def allows_tool(self, name: str) -> bool:
        return self.tools is None or name in self.tools


EVERYTHING = Allowance()
NOTHING = Allowance(
    frozenset(), frozenset(), may_share=False, may_use_shell=False, may_use_api=False
)


def _union(names: Iterable[frozenset[str] | None]) -> frozenset[str] | None:
    total: set[str] = set()
    for part in names:
        if part is None:
            return None
        total |= part
    return frozenset(total)


def _of(rule: AccessRule) -> Allowance:
    return Allowance(
        models=None if rule.all_models else frozenset(rule.model_names),
        tools=None if rule.all_tools else frozenset(rule.tool_names),
        may_share=rule.may_share,
        may_use_shell=rule.may_use_shell,
        may_use_api=rule.may_use_api,
    )


def allowance_for(user: User | AnonymousUser | None) -> Allowance:
    """What `user` may do: the sum of their groups' rules, else the default rule, else
    everything. Administrators (superusers) may do everything; an anonymous user nothing.
    The rules and the user's groups come from the cache (access.cache); the answer is kept on
    the user object for its life (a request's, a turn's)."""
    if user is None or not user.is_authenticated:
        return NOTHING  # (a turned-off account is kept out by the doors' sign-in, not here)
    if user.is_superuser:
        return EVERYTHING
    kept = user.__dict__.get(_KEPT)
    if isinstance(kept, Allowance):
        return kept
    allowance = user.__dict__[_KEPT] = _read(user)
    return allowance


_KEPT = "_access_allowance"


def _read(user: User) -> Allowance:
    all_rules = rules()  # kept in the cache: no query on a server without rules
    if not all_rules:
        return EVERYTHING
    groups = group_ids(user.pk) if any(r.group_id for r in all_rules) else frozenset()
    own = [r for r in all_rules if r.group_id is not None and r.group_id in groups]
    chosen = own or [r for r in all_rules if r.group_id is None]
    if not chosen:
        return EVERYTHING
    parts = [_of(r) for r in chosen]
    return Allowance(
        models=_union(p.models for p in parts),
        tools=_union(p.tools for p in parts),
        may_share=any(p.may_share for p in parts),
        may_use_shell=any(p.may_use_shell for p in parts),
        may_use_api=any(p.may_use_api for p in parts),
    )


def models_for(user: User, allowance: Allowance | None = None) -> list[str]:
    """The models `user` may pick, in the server's order (core.model_choice.allowed_models). The
    demo model, while it answers, is everyone's."""
    allowance = allowance or allowance_for(user)
    return [m for m in allowed_models() if m == DEMO_MODEL_ID or allowance.allows_model(m)]


def default_model_for(user: User) -> str:
    """The model that answers `user`'s sessions that chose none: AGENT_MODEL when they may use
    it, else the first they may; ModelNotAllowed when they may use none."""
    models = models_for(user)
    if settings.AGENT_MODEL in models:
        return str(settings.AGENT_MODEL)
    real = [m for m in models if m != DEMO_MODEL_ID]
    if not real:
        raise ModelNotAllowed(str(settings.AGENT_MODEL), [])
    return real[0]


def model_check(user: User, model: str | None) -> str:
    """The model `user` asks for (None: their default), if they may use it; else ModelNotAllowed
    (a 400), so it is never called. While the demo model answers, it answers whatever was asked:
    nothing is refused."""
    if is_demo():
        return model or DEMO_MODEL_ID
    if model is None:
        return default_model_for(user)
    allowed = models_for(user)
    if model not in allowed:
        raise ModelNotAllowed(model, allowed)
    return model


def sharing_check(user: User) -> None:
    if not allowance_for(user).may_share:
        raise sharing_denied()


def may_use_api(user: User) -> bool:
    return allowance_for(user).may_use_api
