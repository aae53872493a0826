"""The claims the test provider puts in its ID tokens and userinfo: the user's name, e-mail
(verified) and groups (their Django groups)."""

from __future__ import annotations

from typing import Any

from oauth2_provider.oauth2_validators import OAuth2Validator


class Validator(OAuth2Validator):
    oidc_claim_scope = None  # every claim, whatever the scopes

    def get_additional_claims(self, request: Any) -> dict[str, Any]:
        user = request.user
        return {
            "preferred_username": user.username,
            "email": user.email,
            "email_verified": bool(user.email),
            "groups": [group.name for group in user.groups.order_by("name")],
        }
