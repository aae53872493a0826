"""Whether this process can run a sandbox: SANDBOX is not `off`, bubblewrap (SANDBOX_BWRAP) and
util-linux's `prlimit` are installed, and a sandbox really starts (user namespaces allowed: some
kernels and container runtimes refuse them). Probed once per process and per setting, by running
`true` in a sandbox; the first answer is logged, and /healthz and the admin show it. Without it
`run_shell` and `run_tests` are not offered: a command never runs unsandboxed.
"""

from __future__ import annotations

import logging
import shutil
import threading
from dataclasses import dataclass

from django.conf import settings

log = logging.getLogger("sandbox")


@dataclass(frozen=True)
class Availability:
    ok: bool
    why: str  # what is missing, or how the sandbox is set up


_known: dict[tuple[str, ...], Availability] = {}
_lock = threading.Lock()


def availability() -> Availability:
    key = (
        settings.SANDBOX,
        settings.SANDBOX_BWRAP,
        str(settings.SANDBOX_DIR or ""),
        ",".join(settings.SANDBOX_NETWORK),
    )
    found = _known.get(key)
    if found is not None:
        return found
    with _lock:
        found = _known.get(key)
        if found is None:
            found = _probe()
            _known[key] = found
            (log.info if found.ok else log.warning)("sandbox: %s", found.why)
    return found


def _probe() -> Availability:
    if settings.SANDBOX == "off":
        return Availability(
            False, "turned off (SANDBOX=off): run_shell and run_tests are not offered"
        )
    if shutil.which(settings.SANDBOX_BWRAP) is None:
        return Availability(
            False,
            f"bubblewrap ({settings.SANDBOX_BWRAP}) is not installed (Debian: apt-get install "
            "bubblewrap): run_shell and run_tests are not offered",
        )
    if shutil.which("prlimit") is None:
        return Availability(
            False,
            "util-linux's prlimit is not installed: run_shell and run_tests are not offered",
        )
    from . import folders, runner

    try:
        work = folders.write_out({})
    except OSError as exc:
        return Availability(
            False,
            f"the sandbox's folder cannot be written ({exc.strerror}; SANDBOX_DIR): run_shell "
            "and run_tests are not offered",
        )
    from . import network

    mode = network.network_mode()
    proxy = None
    try:
        if mode == "hosts":  # its relay needs python3 in the sandbox: tried too
            proxy = network.RunProxy(network.allowed_hosts(), runner.launcher_uid())
        limits = runner.Limits.from_settings(10)
        outcome = runner.run(work, "true", limits, lambda: False, proxy=proxy)
    finally:
        if proxy is not None:
            proxy.close()
        folders.remove(work)
    if outcome.exit_code != 0:
        said = (outcome.error or outcome.stderr.data.decode("utf-8", "replace")).strip()
        return Availability(
            False,
            f"bubblewrap could not start a sandbox ({said[:300] or outcome.ended}); user "
            "namespaces may be turned off: run_shell and run_tests are not offered",
        )
    if mode == "hosts":
        return Availability(True, f"bubblewrap, network: {', '.join(network.allowed_hosts())}")
    return Availability(
        True, "bubblewrap, no network" if mode == "none" else "bubblewrap, network: all"
    )
