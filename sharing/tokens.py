"""A share link's token: 256 bits, in the link's address and nowhere in the database.

A link keeps a random seed (`secrets.token_urlsafe(32)`, 256 bits); its token is the HMAC-SHA256
of that seed under the server's SECRET_KEY, and the database holds only the token's SHA-256, by
which a visit finds the link (compared again with `hmac.compare_digest`). A copy of the database
alone therefore opens no link, and the owner's profile can still make the address again to copy
it. Should SECRET_KEY change, the links made before keep working (their hash is stored); only
their address can no longer be shown again (`token_for` then gives one whose hash differs).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import re
import secrets

from django.utils.crypto import salted_hmac

_SALT = "rollback.sharing.ShareLink.token"
# What a token looks like: 32 bytes of HMAC-SHA256 in unpadded base64url.
TOKEN_SHAPE = re.compile(r"[A-Za-z0-9_-]{43}")


def new_seed() -> str:
    return secrets.token_urlsafe(32)


def token_for(seed: str) -> str:
    digest = salted_hmac(_SALT, seed, algorithm="sha256").digest()
    return base64.urlsafe_b64encode(digest).rstrip(b"=").decode("ascii")


def token_hash(token: str) -> str:
    return hashlib.sha256(token.encode("ascii")).hexdigest()


def well_formed(token: str) -> bool:
    return TOKEN_SHAPE.fullmatch(token) is not None


def same_hash(a: str, b: str) -> bool:
    """Constant-time comparison of two hashes (hex)."""
    return hmac.compare_digest(a.encode("ascii"), b.encode("ascii"))
