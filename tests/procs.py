"""Processes of the app (daphne, Celery workers, beat, manage.py) started by the tests that need
the served app: the end-to-end tests and the deployment tests. Each process logs to a file of its
own, shown when a test fails."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from tests.manage_server import ManageServer

ROOT = Path(__file__).resolve().parents[1]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def stack_redis_url() -> str:
    """The Redis database of the served stacks (tests/deploy, tests/e2e/test_worker.py), which
    flush it: REDIS_URL's, which under xdist is the running worker's own (tests/workers.py). A
    stack's module runs in one worker, one test after another, so no other test uses that
    database meanwhile; two checkouts sharing one Redis set TEST_REDIS_DBS apart."""
    return os.environ["REDIS_URL"]


def app_env(var_dir: Path, model_url: str, **extra: str) -> dict[str, str]:
    """The environment of a served process: a fresh SQLite file, the fake model server, no
    PostgreSQL, no Redis (unless `extra` adds REDIS_URL)."""
    dropped = {"DATABASE_URL", "REDIS_URL", "ROLLBACK_REQUIRE_POSTGRES", "DJANGO_DEBUG"}
    env = {k: v for k, v in os.environ.items() if k not in dropped and not k.startswith("OPENAI_")}
    env.update(
        {
            "ROLLBACK_VAR_DIR": str(var_dir),
            "OPENAI_BASE_URL": model_url,
            "OPENAI_API_KEY": "test",
            "AGENT_MODEL": "fake-model",
            "AGENT_MAX_RETRIES": "0",
            "AGENT_TIMEOUT": "20",
            "DJANGO_ALLOWED_HOSTS": "127.0.0.1,localhost",
            "PYTHONUNBUFFERED": "1",
            # The end-to-end tests sign up a fresh user per test, all from 127.0.0.1.
            "ROLLBACK_SIGNUPS_PER_HOUR_PER_IP": "1000",
        }
    )
    env.update(extra)
    return env


def manage(env: dict[str, str], *args: str, **kwargs: Any) -> subprocess.CompletedProcess[str]:
    """`manage.py ARGS` run to its end in `env`, whatever its exit status (`kwargs` go to
    subprocess.run)."""
    return subprocess.run(  # noqa: S603 - the test's own argument list, no shell
        [sys.executable, "manage.py", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
        **kwargs,
    )


def manage_ok(env: dict[str, str], *args: str) -> str:
    """`manage.py ARGS` run to its end in `env`; its standard output, or an error with the end
    of what it wrote on standard error."""
    return checked(manage(env, *args), args)


def checked(result: subprocess.CompletedProcess[str], args: tuple[str, ...]) -> str:
    """The standard output of `manage.py ARGS` run to `result`, if it succeeded; an error with
    the end of its standard error otherwise."""
    if result.returncode != 0:
        raise RuntimeError(f"manage.py {' '.join(args)} failed:\n{result.stderr[-4000:]}")
    return result.stdout


def runs_in_place(args: tuple[str, ...]) -> bool:
    """Whether `manage.py ARGS` may run in a long-lived process (tests.manage_server): a test's
    setup or check through `shell -c`, or `createapikey`, whose callers want their output only.
    Everything else (migrate, collectstatic, backup, chat, check...) gets a process of its own:
    what it changes or what its callers look at (the start itself, stdin, the exit status, the
    files it leaves) belongs to a fresh process."""
    if not args:
        return False
    if args[0] == "createapikey":
        return True
    command = ("-c", "--command")
    return args[0] == "shell" and any(a in command or a.startswith("--command=") for a in args)


def wait_until_answers(url: str, proc: subprocess.Popen, timeout: float = 90.0) -> None:
    """Until `url` answers below 500; a process that exits fails at once. The bound is generous,
    a failure's and not a speed's: on two loaded cores a start can take half a minute."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"the process serving {url} exited with {proc.returncode}")
        try:
            with urllib.request.urlopen(url, timeout=2) as response:  # noqa: S310 - a local http URL the test built
                if response.status < 500:
                    return
        except urllib.error.HTTPError as exc:
            if exc.code < 500:
                return
        except OSError:
            pass
        time.sleep(0.1)
    raise RuntimeError(f"{url} did not answer within {timeout:g} s")


@contextmanager
def prepared(env: dict[str, str], log_dir: Path) -> Iterator[Services]:
    """Services for `env`, its var directory made ready (`Services.prepare`), every process
    stopped at the end."""
    services = Services(log_dir)
    try:
        services.prepare(env)
        yield services
    finally:
        services.stop_all()


class Services:
    """Processes started for the tests, each logging (stdout and stderr) to its own file."""

    def __init__(self, log_dir: Path) -> None:
        self.log_dir = log_dir
        self.procs: dict[str, subprocess.Popen] = {}
        self.logs: dict[str, Path] = {}
        # Where each name's current process began writing in its log: a process started again
        # under the same name (beat, after a stop) appends to the same file.
        self._log_starts: dict[str, int] = {}
        self.base_url = ""
        self._files: list = []
        self._servers: dict[tuple[tuple[str, str], ...], ManageServer] = {}

    def manage(self, env: dict[str, str], *args: str) -> str:
        """Run a management command to its end; its standard output, or an error with the end of
        its standard error. `shell -c` and `createapikey` run in one long-lived process per
        environment (tests.manage_server: a fresh process's ~2.8 s of CPU once, not per command),
        the others in a process of their own (`runs_in_place`)."""
        if not runs_in_place(args):
            return manage_ok(env, *args)
        key = tuple(sorted(env.items()))
        server = self._servers.get(key)
        if server is None:
            log = self.log_dir / f"manage-{len(self._servers) + 1}.log"
            server = self._servers[key] = ManageServer(env, log)
            self.logs[log.stem] = log
        return checked(server.run(*args), args)

    def prepare(self, env: dict[str, str]) -> None:
        """`env`'s var directory as `manage.py migrate` and `manage.py collectstatic` leave it,
        from what the run built once (tests.prebuilt): a copy of the migrated SQLite database,
        and the collected static files. A PostgreSQL database (DATABASE_URL) is made migrated,
        a copy of a template: tests.prebuilt.postgres_database."""
        from tests import prebuilt  # (which runs manage.py with this module's helpers)

        var_dir = Path(env["ROLLBACK_VAR_DIR"])
        if "DATABASE_URL" not in env:
            prebuilt.sqlite_database(var_dir)
        prebuilt.static_files(var_dir)

    def setup_with_key(self, env: dict[str, str], code: str, username: str) -> tuple[str, str]:
        """Run `code` (a test's setup, as `manage.py shell -c` runs it), then give `username`
        a new API key as `manage.py createapikey` does (with the service it calls), in one
        process instead of two: a process of the app costs ~2 s of CPU to start. What `code`
        printed, and the key."""
        make_key = (
            "from accounts.models import User\n"
            "from accounts.services import apikey_create\n"
            f"_user = User.objects.get_by_natural_key({username!r})\n"
            "print(apikey_create(user=_user, name='command line')[1])\n"
        )
        printed, _, key = (
            self.manage(env, "shell", "-c", f"{code}\n{make_key}").rstrip().rpartition("\n")
        )
        return printed, key

    def start(self, name: str, cmd: list[str], env: dict[str, str]) -> subprocess.Popen:
        path = self.log_dir / f"{name}.log"
        self._log_starts[name] = path.stat().st_size if path.exists() else 0
        log = path.open("ab")
        self._files.append(log)
        proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)  # noqa: S603 - the test's own argument list, no shell
        self.procs[name] = proc
        self.logs[name] = path
        return proc

    def output(self, name: str) -> str:
        """What the process now running as `name` has logged: not what an earlier one under the
        same name did (a wait for "beat: Starting" found the stopped beat's line at once)."""
        logged = self.logs[name].read_bytes()
        return logged[self._log_starts.get(name, 0) :].decode(errors="replace")

    def start_daphne(self, env: dict[str, str], name: str = "daphne") -> str:
        port = free_port()
        cmd = [sys.executable, "-m", "rollback_site.serve", "-b", "127.0.0.1", "-p", str(port)]
        proc = self.start(name, cmd, env)
        self.base_url = f"http://127.0.0.1:{port}"
        wait_until_answers(f"{self.base_url}/accounts/login/", proc)
        return self.base_url

    def kill(self, name: str) -> None:
        """SIGKILL, as when a machine dies: no cleanup."""
        proc = self.procs[name]
        if proc.poll() is None:
            proc.send_signal(signal.SIGKILL)
            proc.wait(10)

    def stop(self, name: str) -> None:
        proc = self.procs[name]
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(10)

    def stop_all(self) -> None:
        for server in self._servers.values():
            server.stop()
        self._servers.clear()
        for name in list(self.procs):
            self.stop(name)
        for log in self._files:
            log.close()

    def tail(self, lines: int = 60) -> list[tuple[str, str]]:
        out = []
        for name, path in self.logs.items():
            try:
                text = path.read_text(errors="replace").splitlines()[-lines:]
            except OSError:
                continue
            out.append((f"{name} log (last {lines} lines, {path})", "\n".join(text)))
        return out
