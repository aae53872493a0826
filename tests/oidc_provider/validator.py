"""The claims the test provider puts in its ID tokens and userinfo: the user's name, e-mail
(verified) and groups (their Django groups), then what the test set for that user
(`Provider.set_claims`: claims added or replaced, and claims left out), read from the JSON file
OIDC_PROVIDER_CLAIMS_FILE at each token."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from oauth2_provider.oauth2_validators import OAuth2Validator


def claims_set_by_the_test(username: str) -> tuple[dict[str, Any], list[str]]:
    """The claims the test set for `username`, and those it left out."""
    path = Path(os.environ["OIDC_PROVIDER_CLAIMS_FILE"])
    every = json.loads(path.read_text()) if path.exists() else {}
    mine = every.get(username, {})
    return mine.get("set", {}), mine.get("drop", [])


class Validator(OAuth2Validator):
    oidc_claim_scope = None  # every claim, whatever the scopes

    def get_additional_claims(self, request: Any) -> dict[str, Any]:
        user = request.user
        claims = {
            "preferred_username": user.username,
            "email": user.email,
            "email_verified": bool(user.email),
            "groups": [group.name for group in user.groups.order_by("name")],
        }
        added, dropped = claims_set_by_the_test(user.username)
        claims.update(added)
        for name in dropped:
            claims.pop(name, None)
        return claims
