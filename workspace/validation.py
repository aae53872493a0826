"""What a workspace accepts: relative paths of printable names in Unicode's composed form (NFC),
contents of any kind (UTF-8 text without NUL is kept as text, any other bytes as binary), within
WORKSPACE_MAX_FILE_BYTES per file and WORKSPACE_MAX_FILES per workspace. Everything a person, an
integration or the agent sends goes through here before anything is written or looked up."""

from __future__ import annotations

import hashlib
import unicodedata
from dataclasses import dataclass
from typing import Any

from django.conf import settings

from .errors import BadPath, BinaryContent, FileTooLarge
from .models import WORKSPACE_PATH_MAX
from .nfc import nfc

SEGMENT_MAX = 120


def max_file_bytes() -> int:
    return int(getattr(settings, "WORKSPACE_MAX_FILE_BYTES", 262_144))


def max_files() -> int:
    return int(getattr(settings, "WORKSPACE_MAX_FILES", 1_000))


def _bad_char(ch: str) -> bool:
    return ch == "\\" or unicodedata.category(ch) in {"Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp"}


def clean_path(value: Any, *, directory: bool = False) -> str:
    """A workspace path, normalised: in NFC (so `café.md` typed as one "é" or as "e" and a
    combining accent, as macOS names files, is one file), relative, `/`-separated, no `.` or
    `..` segment, no empty segment, printable, at most WORKSPACE_PATH_MAX characters. With
    `directory`, "" (and ".", "/") name the workspace's root."""
    if not isinstance(value, str):
        raise BadPath("A file path must be text, like notes/plan.md.")
    path = nfc(value.strip())
    if "\x00" in path:
        raise BadPath("A file path cannot hold a NUL character.")
    if directory and path in {"", ".", "./", "/"}:
        return ""
    if not path:
        raise BadPath("The file path is empty: give one like notes/plan.md.")
    if path.startswith("/") or (len(path) > 1 and path[1] == ":"):
        raise BadPath(f"'{path[:80]}' is an absolute path: give a path relative to the workspace.")
    segments = [s for s in path.split("/") if s not in {"", "."}]
    if directory and not segments:
        return ""
    if not segments:
        raise BadPath("The file path is empty: give one like notes/plan.md.")
    for segment in segments:
        _check_segment(segment)
    clean = "/".join(segments)
    if len(clean) > WORKSPACE_PATH_MAX:
        raise BadPath(f"The file path is longer than {WORKSPACE_PATH_MAX} characters.")
    return clean


def _check_segment(segment: str) -> None:
    if segment == "..":
        raise BadPath("A file path cannot go up with '..': paths stay inside the workspace.")
    if len(segment) > SEGMENT_MAX:
        raise BadPath(f"A name in the path is longer than {SEGMENT_MAX} characters.")
    if segment != segment.strip():
        raise BadPath("A name in the path cannot start or end with a space.")
    if any(_bad_char(ch) for ch in segment):
        raise BadPath(
            "A file path may hold printable characters only (no control characters or "
            "backslashes): use / between folders."
        )


def clean_content(value: Any) -> str:
    """A file's content: text (bytes must be UTF-8), no NUL character, at most
    WORKSPACE_MAX_FILE_BYTES bytes in UTF-8."""
    if isinstance(value, bytes | bytearray | memoryview):
        raw = bytes(value)
        if len(raw) > max_file_bytes():
            raise _too_large(len(raw))
        try:
            value = raw.decode("utf-8")
        except UnicodeDecodeError:
            raise BinaryContent() from None
    if not isinstance(value, str):
        raise BinaryContent()
    if "\x00" in value:
        raise BinaryContent()
    size = len(value.encode("utf-8", "surrogatepass"))
    if size > max_file_bytes():
        raise _too_large(size)
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise BinaryContent() from None
    return value


def _too_large(size: int) -> FileTooLarge:
    return FileTooLarge(
        f"The file is {size:,} bytes; a workspace file may hold at most {max_file_bytes():,} "
        "bytes (WORKSPACE_MAX_FILE_BYTES). Nothing was written."
    )


def sha256_of(content: str) -> str:
    return hashlib.sha256(content.encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class FileContent:
    """A file's content as stored: `text` for UTF-8 text without NUL (else None: binary), and
    `raw`, its bytes either way."""

    text: str | None
    raw: bytes

    @property
    def binary(self) -> bool:
        return self.text is None

    @property
    def size(self) -> int:
        return len(self.raw)

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.raw).hexdigest()


def clean_file_content(value: Any) -> FileContent:
    """Any file's content: text (a str, or bytes that are UTF-8 without NUL) or binary (any
    other bytes), at most WORKSPACE_MAX_FILE_BYTES bytes."""
    if isinstance(value, str):
        text = clean_content(value)
        return FileContent(text, text.encode("utf-8"))
    if not isinstance(value, bytes | bytearray | memoryview):
        raise BinaryContent()
    raw = bytes(value)
    if len(raw) > max_file_bytes():
        raise _too_large(len(raw))
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        return FileContent(None, raw)
    if "\x00" in text:
        return FileContent(None, raw)
    return FileContent(text, raw)
