"""The sandbox against bad input (issue 38's list): each command gets a bounded, clear result; the
host, the database and other sessions are untouched; the workspace keeps only what the bounds
allow. Through `shell_run`, the service the agent's tools call, on a real branch."""

from __future__ import annotations

import hashlib
import json
import shutil
import socket
import tempfile
import threading
import time
from pathlib import Path

import pytest

from agents.shell_tools import result_json
from sandbox import folders, services
from sandbox.availability import availability
from sandbox.services import ShellRefused, shell_run
from sessions_app.selectors import current_branch
from sessions_app.services import session_create
from tests.processes import alive
from workspace.selectors import workspace_file, workspace_files
from workspace.services import file_write

pytestmark = pytest.mark.django_db(transaction=True)

ROOT = Path(__file__).resolve().parents[2]


def files_of(branch) -> dict[str, str]:
    return {f.path: workspace_file(branch, f.path)[1] for f in workspace_files(branch)}


def none_left(token: str) -> bool:
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        if alive(token) == 0:
            return True
        time.sleep(0.1)
    return False


@pytest.fixture(autouse=True)
def _no_folder_left_behind(settings):
    """A sandbox folder of the test's own, where every run's folder must be gone after it. (Not
    under pytest's tmp_path: its folders are the test user's alone, which the sandbox's uid
    cannot pass through.)"""
    root = Path(tempfile.mkdtemp(prefix="rollback-sandbox-test-"))
    root.chmod(0o711)
    settings.SANDBOX_DIR = root
    yield
    left = list(root.iterdir())
    shutil.rmtree(root, ignore_errors=True)
    assert not left, f"a run's folder was left behind: {left}"


def test_a_fork_bomb_is_held_to_its_processes_and_ends_at_its_timeout(branch):
    started = time.monotonic()
    result = shell_run(branch=branch, command="f(){ f|f& }; f; sleep 30.0417", timeout=2)
    # Bounded either way: the shell itself gets no process for its `sleep` once the bomb holds
    # them all (it exits, and its namespace goes with it), or it got one first and the run ends
    # at its timeout.
    assert result.ended in {"timeout", "exited"}
    assert time.monotonic() - started < 10
    assert "fork" in result.stderr.lower()
    assert none_left("f|f&")
    assert none_left("30.0417")


def test_a_fork_bomb_in_one_session_leaves_another_sessions_run_its_processes(branch, alice):
    """Runs share their uid: a process bound counted over the uid (set outside the sandbox)
    let one run's bomb take every process another run was allowed. Each run's bound is its own."""
    other = current_branch(session_create(owner=alice, name="beside the bomb"))
    forks = "i=0; while [ $i -lt 60 ]; do (true) || echo refused; i=$((i+1)); sleep 0.05; done"
    results: dict[str, object] = {}
    steady = threading.Thread(
        target=lambda: results.update(steady=shell_run(branch=other, command=forks, timeout=20))
    )
    steady.start()
    deadline = time.monotonic() + 10
    while other.session_id not in services._running:  # its sandbox is starting
        assert time.monotonic() < deadline, "the steady run never began"
        time.sleep(0.01)
    time.sleep(0.3)
    try:
        bomb = shell_run(branch=branch, command="f(){ f|f& }; f; sleep 30.0419", timeout=2)
    finally:
        steady.join()
    assert "fork" in bomb.stderr.lower()
    done = results["steady"]
    assert (done.ended, done.exit_code, done.stdout, done.stderr) == ("exited", 0, "", "")
    assert none_left("30.0419")


def test_an_infinite_loop_and_a_command_that_ignores_sigterm_are_killed_whole(branch):
    for command in ("while :; do :; done", "trap '' TERM INT; (setsid sleep 60.0418 &); sleep 60"):
        result = shell_run(branch=branch, command=command, timeout=1)
        assert (result.ended, result.exit_code) == ("timeout", None), result.stderr
        assert json.loads(result_json(result))["note"] == "It was killed at its timeout."
    assert none_left("while :; do :; done")
    assert none_left("60.0418")


def test_a_file_past_the_bounds_is_not_kept_and_the_disk_bound_kills_the_run(branch, settings):
    settings.WORKSPACE_MAX_FILE_BYTES = 1000
    result = shell_run(branch=branch, command="echo small > ok.txt; yes > big", timeout=5)
    # `yes` stops at the largest file a process may write (RLIMIT_FSIZE: the disk bound), or the
    # disk bound kills the run first, whichever the watch sees first: bounded either way.
    assert result.ended in {"exited", "disk"}
    assert result.changed == ["ok.txt"]
    (why,) = [why for path, why in result.not_kept if path == "big"]
    assert "WORKSPACE_MAX_FILE_BYTES" in why
    settings.SANDBOX_MAX_DISK_BYTES = 2 * 1024 * 1024
    result = shell_run(
        branch=branch, command="i=0; while :; do head -c 100000 /dev/zero > f$i; i=$((i+1)); done"
    )
    assert result.ended == "disk"
    kept = files_of(branch)
    assert kept.pop("ok.txt") == "small\n"
    # Zeros are no text: of the files it wrote, only one it was killed before filling (empty)
    # may be kept.
    assert set(kept.values()) <= {""}
    assert any(path.startswith("f") for path, _ in result.not_kept)


def test_a_hundred_thousand_tiny_files_stop_at_the_bound_and_the_workspace_keeps_its_most(
    branch, settings
):
    settings.SANDBOX_MAX_FILES = 3000
    settings.WORKSPACE_MAX_FILES = 50
    file_write(branch=branch, path="keep.md", content="mine")
    command = "i=0; while [ $i -lt 100000 ]; do echo $i > f$i; i=$((i+1)); done"
    result = shell_run(branch=branch, command=command, timeout=60)
    assert result.ended == "files"
    assert len(result.changed) == 49
    assert len(files_of(branch)) == 50
    assert files_of(branch)["keep.md"] == "mine"
    shown = json.loads(result_json(result))
    assert len(shown["not_kept"]) <= 20
    assert shown["not_kept_more"] == len(result.not_kept) - len(shown["not_kept"])
    assert "WORKSPACE_MAX_FILES" in shown["not_kept"][0]["why"]


def test_the_hosts_secrets_files_and_environment_are_out_of_reach(branch, monkeypatch):
    monkeypatch.setenv("ROLLBACK_CANARY", "canary-7f3a")
    command = (
        "cat /etc/shadow /etc/passwd; ls /root /home /var; "
        f"cat {ROOT}/manage.py {ROOT}/rollback_site/settings/env.py; ls {folders.sandbox_root()}"
    )
    result = shell_run(branch=branch, command=command, timeout=5)
    assert result.stdout == ""
    assert result.stderr.count("No such file or directory") == 8, result.stderr
    environment = shell_run(branch=branch, command="env; cat /proc/1/environ", timeout=5)
    assert "canary-7f3a" not in environment.stdout
    *variables, first = environment.stdout.split("\n")
    assert {line.split("=", 1)[0] for line in variables} <= {
        "PATH", "HOME", "TMPDIR", "LANG", "PYTHONDONTWRITEBYTECODE", "PWD", "SHLVL", "OLDPWD", "_",
    }  # fmt: skip
    # The sandbox's PID 1 (bubblewrap) was started with two variables, none of the app's.
    assert first == "PATH=/usr/local/bin:/usr/bin:/bin\x00LANG=C.UTF-8\x00".replace(
        "\x00", "\ufffd"
    )


def test_no_socket_reaches_the_host_or_the_outside(branch):
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(3)
    port = listener.getsockname()[1]
    reached: list[bool] = []

    def accept() -> None:
        try:
            listener.accept()
            reached.append(True)
        except OSError:
            pass

    waiter = threading.Thread(target=accept)
    waiter.start()
    script = (
        "import socket\n"
        f"for host, port in (('127.0.0.1', {port}), ('10.0.2.2', 80), ('8.8.8.8', 53)):\n"
        "    try:\n"
        "        socket.create_connection((host, port), timeout=1)\n"
        "        print('reached', host)\n"
        "    except OSError as exc:\n"
        "        print('refused', host, exc.errno)\n"
    )
    file_write(branch=branch, path="net.py", content=script)
    try:
        result = shell_run(branch=branch, command="python3 net.py", timeout=10)
    finally:
        waiter.join()
        listener.close()
    assert reached == []
    assert "reached" not in result.stdout
    assert result.stdout.count("refused") == 3, result.stdout + result.stderr


def test_links_devices_and_names_the_workspace_refuses_are_named_not_kept(branch):
    python = Path("/usr/bin/python3").resolve()
    before = hashlib.sha256(python.read_bytes()).hexdigest()
    command = (
        "ln -s /usr/bin/python3 py; echo x > py; ln -s .. up; ln -s /etc etc; mkfifo pipe; "
        "touch \"$(printf 'two\\nlines')\" \"$(printf 'caf\\351')\" 'a..b.txt'"
    )
    result = shell_run(branch=branch, command=command, timeout=5)
    assert hashlib.sha256(python.read_bytes()).hexdigest() == before
    why = dict(result.not_kept)
    assert set(why) == {"py", "up", "etc", "pipe", "two\nlines", "caf\ufffd"}, why
    assert why["py"].startswith("a symbolic link")
    assert why["pipe"].startswith("not a regular file")
    assert "printable" in why["two\nlines"]
    assert result.changed == ["a..b.txt"]
    # A second run sees no link: what was not kept is not in the workspace.
    again = shell_run(branch=branch, command="ls -A", timeout=5)
    assert again.stdout.split() == ["a..b.txt"]


def test_binary_and_endless_output_come_back_bounded_as_text(branch, settings):
    settings.SANDBOX_MAX_OUTPUT_BYTES = 4096
    result = shell_run(
        branch=branch,
        command="head -c 3000 /dev/urandom; head -c 52428800 /dev/zero >&2",
        timeout=30,
    )
    assert result.exit_code == 0
    assert "\x00" not in result.stdout
    assert "\x00" not in result.stderr
    assert len(result.stderr.encode()) <= 4096 * 3
    assert result.stderr_cut == 50 * 1024 * 1024 - 4096
    shown = json.loads(result_json(result))
    assert shown["stderr_cut_bytes"] == result.stderr_cut


def test_a_second_command_of_a_session_still_running_one_is_refused_at_once(branch, alice):
    other = session_create(owner=alice, name="other")
    results: list[object] = []
    first = threading.Thread(
        target=lambda: results.append(shell_run(branch=branch, command="sleep 2", timeout=5))
    )
    first.start()
    deadline = time.monotonic() + 10
    while branch.session_id not in services._running:  # the first run has begun
        assert time.monotonic() < deadline, "the first run never began"
        time.sleep(0.01)
    try:
        with pytest.raises(ShellRefused, match="still running"):
            shell_run(branch=branch, command="echo second", timeout=5)
        beside = shell_run(branch=current_branch(other), command="echo beside", timeout=5)
    finally:
        first.join()
    assert beside.stdout == "beside\n"
    assert len(results) == 1


def test_a_stop_kills_the_command_and_what_it_wrote_so_far_is_kept(branch):
    stop_at = time.monotonic() + 2.0
    result = shell_run(
        branch=branch,
        command="echo started > log.txt; sleep 60.0419",
        timeout=30,
        stop=lambda: time.monotonic() >= stop_at,
    )
    assert (result.ended, result.exit_code) == ("stopped", None)
    assert result.seconds < 5
    assert files_of(branch) == {"log.txt": "started\n"}
    assert none_left("60.0419")


@pytest.mark.parametrize("command", ["", "   ", "a\x00b", "x" * 10_001, 42])
def test_a_bad_command_is_refused_before_anything_runs(branch, command):
    with pytest.raises(ShellRefused):
        shell_run(branch=branch, command=command)


@pytest.mark.parametrize("timeout", ["soon", -1, 0])
def test_a_bad_timeout_is_refused(branch, timeout):
    with pytest.raises(ShellRefused, match="seconds"):
        shell_run(branch=branch, command="true", timeout=timeout)


def test_a_timeout_past_the_operators_maximum_is_cut_to_it(branch, settings):
    settings.SANDBOX_MAX_SECONDS = 1
    result = shell_run(branch=branch, command="sleep 30", timeout=3600)
    assert result.ended == "timeout"
    assert result.seconds < 5


def test_a_sandbox_folder_that_cannot_be_written_refuses_the_command_clearly(
    branch, settings, tmp_path
):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    settings.SANDBOX_DIR = blocker / "runs"
    with pytest.raises(ShellRefused, match="could not write the workspace out"):
        shell_run(branch=branch, command="true")
    assert not availability().ok
    assert "SANDBOX_DIR" in availability().why
