"""The package indexes pip is configured with, as uv's environment variables.

uv reads no pip configuration. A machine whose pip is set up with extra indexes or wheel
directories (pip.conf, PIP_* variables) must get the same packages from uv, or a lock file made
with pip's view of the registry would not install. This prints shell assignments for `make`:

    UV_INDEX_URL=... UV_EXTRA_INDEX_URL=... UV_FIND_LINKS=... UV_INDEX_STRATEGY=...

taken from `pip config list` (pip's own reading of its files and PIP_* variables, the environment
winning over the files as in pip). A variable the caller already set (UV_INDEX_URL, ...) is kept.
With no pip configuration at all it prints only the index strategy: uv's default index is PyPI.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import sys

# pip's option -> uv's variable, and how uv separates several values.
OPTIONS = {
    "index-url": ("UV_INDEX_URL", " "),
    "extra-index-url": ("UV_EXTRA_INDEX_URL", " "),
    "find-links": ("UV_FIND_LINKS", ","),
}
# pip looks at every index for the best version; uv's default stops at the first index that has
# the name (a defence against dependency confusion we do not need between PyPI and its mirrors).
STRATEGY = "unsafe-best-match"
# Where pip's configuration is read from, least important first: pip's order (files, then env).
SECTIONS = ("global", "install", ":env:")


def pip_config() -> dict[str, str]:
    """pip's configured options (`extra-index-url` -> its value), the later section winning."""
    result = subprocess.run(
        [sys.executable, "-m", "pip", "config", "list"],
        capture_output=True,
        text=True,
        check=False,
    )
    found: dict[str, tuple[int, str]] = {}
    for line in result.stdout.splitlines():
        key, sep, raw = line.partition("=")
        if not sep or "." not in key:
            continue
        section, _, option = key.rpartition(".")
        if section not in SECTIONS or option not in OPTIONS:
            continue
        rank = SECTIONS.index(section)
        if option not in found or rank >= found[option][0]:
            found[option] = (rank, _unquote(raw))
    return {option: value for option, (_, value) in found.items()}


def _unquote(raw: str) -> str:
    raw = raw.strip()
    if len(raw) >= 2 and raw[0] == raw[-1] and raw[0] in "'\"":
        return raw[1:-1]
    return raw


def uv_variables(config: dict[str, str]) -> dict[str, str]:
    env = {"UV_INDEX_STRATEGY": os.environ.get("UV_INDEX_STRATEGY", STRATEGY)}
    for option, (variable, separator) in OPTIONS.items():
        if variable in os.environ:
            env[variable] = os.environ[variable]
        elif option in config:
            env[variable] = separator.join(config[option].split())
    return env


def main() -> None:
    env = uv_variables(pip_config())
    print(" ".join(f"{name}={shlex.quote(value)}" for name, value in sorted(env.items())))


if __name__ == "__main__":
    main()
