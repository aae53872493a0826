"""A real gateway between the app and the model: LiteLLM's proxy, started as a subprocess in front
of the fake Chat Completions server (tests/fakes/chat_server.py), fully offline.

LiteLLM runs from a virtualenv of its own (`.venv-gateway`, made by `make install` from
tests/gateway/requirements.txt; ROLLBACK_LITELLM names another `litellm` executable): it pins
openai<3, and the app's environment must not be pinned with it.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.procs import ROOT, free_port

GATEWAY_MODEL = "gateway-model"
MASTER_KEY = "sk-rollback-gateway-test"
START_TIMEOUT = 60.0  # seconds; it starts in about 9

# LiteLLM fetches a few files from GitHub at start (the model cost map above all) unless told to
# use the copies bundled with it; LITELLM_MODE=PRODUCTION stops it loading a `.env` file.
OFFLINE_ENV = {
    "LITELLM_LOCAL_MODEL_COST_MAP": "True",
    "LITELLM_LOCAL_ANTHROPIC_BETA_HEADERS": "True",
    "LITELLM_LOCAL_BLOG_POSTS": "True",
    "LITELLM_LOCAL_POLICY_TEMPLATES": "True",
    "LITELLM_LOCAL_AUTOROUTER_PRESETS": "True",
    "LITELLM_MODE": "PRODUCTION",
    "LITELLM_LOG": "INFO",
    "PYTHONUNBUFFERED": "1",
}


def litellm_executable() -> str:
    named = os.environ.get("ROLLBACK_LITELLM")
    candidates = [named] if named else [str(ROOT / ".venv-gateway" / "bin" / "litellm")]
    if not named:
        candidates.append(shutil.which("litellm") or "")
    for candidate in candidates:
        if candidate and os.access(candidate, os.X_OK):
            return candidate
    pytest.fail(
        "The gateway tests need LiteLLM's proxy: `make install` installs it into .venv-gateway "
        f"(tests/gateway/requirements.txt), or set ROLLBACK_LITELLM. Looked at: {candidates}",
        pytrace=False,
    )


def config(upstream_base_url: str) -> str:
    """The proxy's config: one model, routed to the fake server as an OpenAI-compatible upstream;
    no retries, no fallbacks, no cooldowns of its own, so what the tests see is deterministic."""
    return json.dumps(  # JSON is YAML
        {
            "model_list": [
                {
                    "model_name": GATEWAY_MODEL,
                    "litellm_params": {
                        "model": "openai/fake-model",
                        "api_base": upstream_base_url,
                        "api_key": "upstream-key",
                    },
                }
            ],
            "litellm_settings": {"num_retries": 0, "request_timeout": 20},
            "router_settings": {"num_retries": 0, "disable_cooldowns": True},
            "general_settings": {"master_key": MASTER_KEY},
        },
        indent=2,
    )


@dataclass
class Gateway:
    url: str  # http://127.0.0.1:<port>
    key: str
    model: str
    log: Path
    startup_seconds: float

    @property
    def base_url(self) -> str:
        return f"{self.url}/v1"

    def log_tail(self, lines: int = 80) -> str:
        try:
            text = self.log.read_text(errors="replace").splitlines()[-lines:]
        except OSError as exc:
            return f"(no log: {exc})"
        return "\n".join(text)


def _wait_ready(url: str, proc: subprocess.Popen, log: Path, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    last = "no answer yet"
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            break
        try:
            with urllib.request.urlopen(f"{url}/health/readiness", timeout=2) as response:  # noqa: S310 - a local http URL the test built
                if response.status == 200:
                    return
                last = f"HTTP {response.status}"
        except urllib.error.HTTPError as exc:
            last = f"HTTP {exc.code}"
        except OSError as exc:
            last = repr(exc)
        time.sleep(0.2)
    tail = "\n".join(log.read_text(errors="replace").splitlines()[-80:])
    state = (
        f"exited with {proc.returncode}"
        if proc.poll() is not None
        else f"was not ready within {timeout:g} s ({last})"
    )
    raise RuntimeError(f"LiteLLM's proxy at {url} {state}. Its log ({log}):\n{tail}")


def _stop(proc: subprocess.Popen) -> None:
    """Terminate the proxy's process group (uvicorn's, started by us), then kill it."""
    if proc.poll() is not None:
        return
    try:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(10)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(10)
    except ProcessLookupError:
        pass


@pytest.fixture(scope="session")
def gateway(model_server, tmp_path_factory) -> Iterator[Gateway]:
    """LiteLLM's proxy on a free port, in front of the session's fake model server. Session
    scoped: it takes seconds to start."""
    executable = litellm_executable()
    home = tmp_path_factory.mktemp("litellm")
    config_path = home / "config.yaml"
    config_path.write_text(config(model_server.base_url))
    log = home / "litellm.log"
    port = free_port()
    # A clean environment: no DATABASE_URL (LiteLLM would use it for its own tables), no
    # REDIS_URL, no OPENAI_* of the developer's.
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(home),
        "LANG": os.environ.get("LANG", "C.UTF-8"),
        **OFFLINE_ENV,
    }
    cmd = [executable, "--config", str(config_path), "--host", "127.0.0.1", "--port", str(port)]
    started = time.monotonic()
    with log.open("ab") as out:
        proc = subprocess.Popen(  # noqa: S603 - the test's own argument list, no shell
            cmd, cwd=home, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )
    try:
        url = f"http://127.0.0.1:{port}"
        _wait_ready(url, proc, log, START_TIMEOUT)
        yield Gateway(url, MASTER_KEY, GATEWAY_MODEL, log, time.monotonic() - started)
    finally:
        _stop(proc)


@pytest.fixture
def upstream(gateway, llm):
    """The fake model server behind the gateway, with no queued answers or recorded requests."""
    return llm


@pytest.fixture
def via_gateway(gateway, upstream, settings):
    """The app in this process talking to the model through the gateway."""
    settings.OPENAI_BASE_URL = gateway.base_url
    settings.OPENAI_API_KEY = gateway.key
    settings.AGENT_MODEL = gateway.model
    settings.AGENT_MAX_RETRIES = 2
    settings.AGENT_TIMEOUT = 20
    return gateway


@pytest.fixture(autouse=True)
def _gateway_log_on_failure(request):
    """Show the proxy's log under a failed test."""
    yield
    report = getattr(request.node, "rep_call", None)
    if report is not None and report.failed and "gateway" in request.fixturenames:
        gw = request.getfixturevalue("gateway")
        print(f"\n--- LiteLLM proxy log (last 80 lines, {gw.log}) ---\n{gw.log_tail()}")


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_makereport(item, call):
    report = yield
    if report.when == "call":
        item.rep_call = report
    return report
