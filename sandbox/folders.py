"""A workspace written out into a fresh folder for one run, and what the run left there read back.

The folder is `<root>/run-XXXX/work` (`root`: SANDBOX_DIR, else `rollback-sandbox` in /dev/shm
when it has room, or in the system's temporary folder), the run's folder readable by its owner
only. Run as root, the tree
is given to the sandbox's uid (sandbox.runner), which the command runs as.

Reading back takes regular files only (text or binary), each opened without following a link; a
symbolic link, a device, a pipe or a socket is named with why it was not kept, and so is a file
whose name the workspace refuses (`..`, a newline, bytes that are not UTF-8), one over
WORKSPACE_MAX_FILE_BYTES, and the new files past WORKSPACE_MAX_FILES. A file of the workspace that
is gone is a deletion; one that became something not kept stays as it was.
"""

from __future__ import annotations

import os
import shutil
import stat
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from django.conf import settings

from core.errors import DomainError
from workspace.validation import clean_path, max_file_bytes, max_files

from .runner import SANDBOX_UID, launcher_uid


@dataclass
class Taken:
    """What a run changed: `writes` (path: new bytes), `deletes`, and `not_kept` (path, why)."""

    writes: dict[str, bytes] = field(default_factory=dict)
    deletes: list[str] = field(default_factory=list)
    not_kept: list[tuple[str, str]] = field(default_factory=list)


# The shared memory's tmpfs, where a run's copy is written when it has room for the runs of a
# worker: a disk's file system can take a millisecond a file to write (500 files, half a second).
SHM = Path("/dev/shm")  # noqa: S108 - a folder of our own in it, made readable by its owner only


def sandbox_root() -> Path:
    configured = settings.SANDBOX_DIR
    root = Path(configured) if configured else _default_root()
    root.mkdir(mode=0o711, parents=True, exist_ok=True)
    return root


def _default_root() -> Path:
    """`rollback-sandbox` in /dev/shm when it can hold SANDBOX_PER_WORKER runs at their disk
    bound twice over, else in the system's temporary folder."""
    wanted = 2 * settings.SANDBOX_PER_WORKER * settings.SANDBOX_MAX_DISK_BYTES
    try:
        stats = os.statvfs(SHM)
    except OSError:
        stats = None
    if stats is not None and stats.f_bavail * stats.f_frsize >= wanted and os.access(SHM, os.W_OK):
        return SHM / "rollback-sandbox"
    return Path(tempfile.gettempdir()) / "rollback-sandbox"


def write_out(files: dict[str, bytes]) -> Path:
    """A fresh folder holding `files` (workspace paths, already clean); returns its `work`."""
    run = tempfile.mkdtemp(prefix="run-", dir=sandbox_root())
    try:
        return _fill(run, files)
    except OSError:
        remove(Path(run, "work"))
        raise


def _fill(run: str, files: dict[str, bytes]) -> Path:
    work = os.path.join(run, "work")
    os.mkdir(work)
    owner = launcher_uid()
    made = {work}
    for path, content in files.items():
        target = os.path.join(work, path)
        folder = os.path.dirname(target)
        if folder not in made:
            os.makedirs(folder, exist_ok=True)
            made.add(folder)
        fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        try:
            os.write(fd, content)
            if owner is not None:
                os.fchown(fd, SANDBOX_UID, SANDBOX_UID)
        finally:
            os.close(fd)
    if owner is not None:
        for folder, dirs, _ in os.walk(run):
            os.chown(folder, SANDBOX_UID, SANDBOX_UID)
            for name in dirs:
                os.chown(os.path.join(folder, name), SANDBOX_UID, SANDBOX_UID)
    return Path(work)


def remove(work: Path) -> None:
    """Remove the run's folder, whatever the command left (folders it made unreadable too)."""
    run = work.parent
    for folder, dirs, _ in os.walk(run):
        for name in dirs:
            path = os.path.join(folder, name)
            if not os.path.islink(path):
                os.chmod(path, 0o700)
    shutil.rmtree(run, ignore_errors=True)


def take_back(work: Path, before: dict[str, bytes]) -> Taken:
    """What the run changed against `before` (path: its content when written out)."""
    taken = Taken()
    present: set[str] = set()
    room = max(0, max_files() - len(before))
    top = str(work)
    for folder, dirs, names in os.walk(top, followlinks=False):
        prefix = "" if folder == top else folder[len(top) + 1 :].replace(os.sep, "/") + "/"
        links = [d for d in dirs if os.path.islink(os.path.join(folder, d))]
        for name in sorted(names + links):
            full = os.path.join(folder, name)
            raw = prefix + name
            present.add(raw)
            if raw in before and _unchanged(full, before[raw]):
                continue
            path, why = _readable(full, raw)
            if why:
                taken.not_kept.append((path, why))
                continue
            content, why = _content(full)
            if why or content is None:
                taken.not_kept.append((path, why))
                continue
            if path not in before:
                if room == 0:
                    taken.not_kept.append(
                        (path, "the workspace holds the most files it may (WORKSPACE_MAX_FILES)")
                    )
                    continue
                room -= 1
            taken.writes[path] = content
        dirs[:] = [d for d in dirs if d not in links]
    taken.deletes = sorted(p for p in before if p not in present)
    return taken


def _unchanged(full: str, content: bytes) -> bool:
    """Whether `full` is still a regular file holding exactly `content` (never through a link)."""
    try:
        fd = os.open(full, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return False
    with os.fdopen(fd, "rb") as handle:
        info = os.fstat(handle.fileno())
        if not stat.S_ISREG(info.st_mode) or info.st_size != len(content):
            return False
        return handle.read(len(content) + 1) == content


def _readable(full: str, raw: str) -> tuple[str, str]:
    """The workspace path of `raw` and "" when it is a regular file the workspace can name;
    else the name as shown and why it is not kept."""
    shown = raw.encode("utf-8", "surrogateescape").decode("utf-8", "replace")
    try:
        mode = os.lstat(full).st_mode
    except OSError as exc:
        return shown, f"could not be read ({exc.strerror})"
    if stat.S_ISLNK(mode):
        return shown, "a symbolic link (links are not kept)"
    if not stat.S_ISREG(mode):
        return shown, "not a regular file (devices, pipes and sockets are not kept)"
    try:
        return clean_path(raw), ""
    except DomainError as exc:
        return shown, exc.message


def _content(full: str) -> tuple[bytes | None, str]:
    """A regular file's bytes, or why they are not kept."""
    try:
        fd = os.open(full, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError as exc:
        return None, f"could not be read ({exc.strerror})"
    with os.fdopen(fd, "rb") as handle:
        size = os.fstat(handle.fileno()).st_size
        if size > max_file_bytes():
            return None, (
                f"{size:,} bytes, over the {max_file_bytes():,} a workspace file may hold "
                "(WORKSPACE_MAX_FILE_BYTES)"
            )
        return handle.read(max_file_bytes() + 1), ""
