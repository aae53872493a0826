"""Start the test OpenID Connect provider (tests.oidc_provider) as a process of its own: a fresh
RSA key and SQLite file, migrated; its users and Rollback's client are added through its
`manage.py shell`, and a user's claims changed through a file it reads at each token
(`set_claims`)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from tests.procs import ROOT, free_port, wait_until_answers


class Provider:
    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        key_file = folder / "provider-key.pem"
        key_file.write_bytes(
            self.key.private_bytes(
                serialization.Encoding.PEM,
                serialization.PrivateFormat.PKCS8,
                serialization.NoEncryption(),
            )
        )
        dropped = {"DATABASE_URL", "REDIS_URL", "DJANGO_SETTINGS_MODULE"}
        self.env = {k: v for k, v in os.environ.items() if k not in dropped}
        self.env.update(
            {
                "DJANGO_SETTINGS_MODULE": "tests.oidc_provider.settings",
                "OIDC_PROVIDER_DB": str(folder / "provider.sqlite3"),
                "OIDC_PROVIDER_KEY_FILE": str(key_file),
                "OIDC_PROVIDER_CLAIMS_FILE": str(folder / "claims.json"),
                "PYTHONUNBUFFERED": "1",
            }
        )
        self.port = free_port()
        self.base_url = f"http://127.0.0.1:{self.port}"
        self.issuer = f"{self.base_url}/o"
        self.process: subprocess.Popen[bytes] | None = None

    def _django(self, *args: str) -> str:
        done = subprocess.run(  # noqa: S603 - the test's own argument list, no shell
            [sys.executable, "-m", "django", *args],
            cwd=ROOT,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=180,
        )
        if done.returncode != 0:
            raise RuntimeError(f"the test provider's {args[0]} failed:\n{done.stderr[-3000:]}")
        return done.stdout

    def start(self) -> Provider:
        self._django("migrate", "--noinput")
        log = (self.folder / "provider.log").open("ab")
        self.process = subprocess.Popen(  # noqa: S603 - the test's own argument list, no shell
            [sys.executable, "-m", "django", "runserver", "--noreload", f"127.0.0.1:{self.port}"],
            cwd=ROOT,
            env=self.env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        wait_until_answers(f"{self.issuer}/.well-known/openid-configuration", self.process)
        return self

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            self.process.wait(10)

    def shell(self, code: str) -> str:
        return self._django("shell", "-c", code)

    def add_user(
        self, username: str, password: str, email: str = "", groups: tuple[str, ...] = ()
    ) -> str:
        """A person at the provider; their subject (`sub`: their id there)."""
        code = (
            "from django.contrib.auth.models import Group, User\n"
            f"u = User.objects.create_user({username!r}, email={email!r}, password={password!r})\n"
            f"for name in {list(groups)!r}:\n"
            "    u.groups.add(Group.objects.get_or_create(name=name)[0])\n"
            "print(u.pk)\n"
        )
        return self.shell(code).split()[-1]

    def set_claims(self, username: str, *, drop: tuple[str, ...] = (), **claims: Any) -> None:
        """From the next token on, `username`'s ID token and userinfo carry `claims` (added, or
        in place of the provider's own: `groups=[...]`) and leave out the claims named in
        `drop`; what was set for them before is forgotten."""
        path = Path(self.env["OIDC_PROVIDER_CLAIMS_FILE"])
        every = json.loads(path.read_text()) if path.exists() else {}
        every[username] = {"set": claims, "drop": list(drop)}
        written = path.with_suffix(".tmp")
        written.write_text(json.dumps(every))
        written.replace(path)  # whole, never half-written, for the provider reading it

    def add_client(self, client_id: str, secret: str, redirect_uri: str) -> None:
        code = (
            "from oauth2_provider.models import Application as A\n"
            f"A.objects.create(name={client_id!r}, client_id={client_id!r},"
            f" client_secret={secret!r}, client_type=A.CLIENT_CONFIDENTIAL,"
            " authorization_grant_type=A.GRANT_AUTHORIZATION_CODE,"
            f" redirect_uris={redirect_uri!r}, algorithm=A.RS256_ALGORITHM,"
            " skip_authorization=True)\n"
        )
        self.shell(code)

    def discovery(self) -> dict:
        import urllib.request

        url = f"{self.issuer}/.well-known/openid-configuration"
        with urllib.request.urlopen(url, timeout=10) as answer:  # noqa: S310 - a local URL
            return json.loads(answer.read())
