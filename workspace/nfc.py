"""File paths in Unicode's composed form (NFC), and what becomes of paths stored in another form.

`café.md` may arrive as one "é" (NFC, what most keyboards type) or as "e" and a combining accent
(NFD, what macOS names files with): two strings that look the same. Every path that enters the
workspace is normalised to NFC (validation.clean_path), so both name one file.

Paths stored before that rule (and paths in an export made by such a server) are renamed to
their NFC form once (the migration workspace 0002, and an import: checkpoints.transfer_files),
by `nfc_renames`: a path whose NFC form names nothing else of the session simply takes it (the
usual case: nothing changes for the reader). When the NFC form is already taken (a real twin,
two files that looked alike), the two are not merged, which would make a checkpoint show one
file where it showed two: the non-NFC one is renamed visibly, "café (2).md", as a file manager
names a copy, and stays reachable under that name. This module uses the standard library only,
so the migration can use it as it stands.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Iterable

# Suffixes tried for a twin's new name: " (2)" to " (99)".
_SUFFIXES = range(2, 100)
# sessions_app.models.WORKSPACE_PATH_MAX, repeated: a migration must not depend on the models.
_PATH_MAX = 255


def nfc(text: str) -> str:
    """`text` in Unicode's composed form (NFC); text that cannot change (ASCII) as it is."""
    return text if text.isascii() else unicodedata.normalize("NFC", text)


def _parents(path: str) -> list[str]:
    parts = path.split("/")
    return ["/".join(parts[:n]) for n in range(1, len(parts))]


def _numbered(path: str, n: int) -> str:
    """`path` with " (n)" before the extension of its last name: a/café.md -> a/café (2).md."""
    folder, sep, name = path.rpartition("/")
    stem, dot, ext = name.rpartition(".")
    if not stem:  # no extension, or a name that starts with its only dot (.env)
        stem, dot, ext = name, "", ""
    return f"{folder}{sep}{stem} ({n}){dot}{ext}"


class _Taken:
    """The paths in use and the folders they make, to tell a free path from one that would be
    the same file, a file where a folder is, or a file inside another file."""

    def __init__(self, paths: Iterable[str]) -> None:
        self.files: set[str] = set()
        self.folders: set[str] = set()
        for path in paths:
            self.add(path)

    def add(self, path: str) -> None:
        self.files.add(path)
        self.folders.update(_parents(path))

    def free(self, path: str) -> bool:
        if path in self.files or path in self.folders:
            return False
        return not any(parent in self.files for parent in _parents(path))


def nfc_renames(paths: Iterable[str]) -> dict[str, str]:
    """For the distinct paths of one session, the new path of each that is not in NFC: its NFC
    form when that is free, else the NFC form numbered " (2)", " (3)"... (the first free one).
    A path for which no free name is found (a twin whose folder is itself a file) is left out:
    it keeps its stored form. Paths already in NFC are never renamed."""
    distinct = sorted(set(paths))
    taken = _Taken(p for p in distinct if nfc(p) == p)
    renames: dict[str, str] = {}
    for path in distinct:
        target = nfc(path)
        if target == path:
            continue
        candidates = [target, *(_numbered(target, n) for n in _SUFFIXES)]
        chosen = next((c for c in candidates if len(c) <= _PATH_MAX and taken.free(c)), None)
        if chosen is not None:
            taken.add(chosen)
            renames[path] = chosen
    return renames
