"""The workspace's rows: the contents of files (stored once per session) and their versions.

The rows below them are referred to by name ("sessions_app.Branch"), and the turns that write
them by name too ("sessions_app.Turn").
"""

from __future__ import annotations

from typing import ClassVar

from django.db import models
from django.utils import timezone

from core.validation import time_in_range

WORKSPACE_PATH_MAX = 255


class WorkspaceBlob(models.Model):
    """The content of a file, stored once per session however many versions, branches and
    checkpoints show it: addressed by the SHA-256 of its bytes. Text in `content`, any other
    bytes in `data`."""

    session = models.ForeignKey("sessions_app.Session", on_delete=models.CASCADE, related_name="+")
    sha256 = models.CharField(max_length=64)
    size = models.PositiveIntegerField()  # bytes (a text's in UTF-8)
    # A text file's content (UTF-8 without NUL); "" for a binary one, whose bytes are in `data`.
    content = models.TextField(blank=True, default="")
    # A binary file's bytes (an image, a PDF, a compiled file); null for a text file.
    data = models.BinaryField(null=True, blank=True, editable=False)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        verbose_name = "file content"
        constraints: ClassVar[list[models.BaseConstraint]] = [
            models.UniqueConstraint(fields=["session", "sha256"], name="blob_unique_per_session"),
            time_in_range("created_at", name="blob_created_at_in_range"),
        ]

    def __str__(self) -> str:
        return f"{self.sha256[:12]} ({self.size} bytes)"

    @property
    def is_binary(self) -> bool:
        return self.data is not None


class FileVersion(models.Model):
    """One write (or deletion, `blob` null) of one path, at a position of a branch. Written once,
    never updated, never copied: a branch's workspace as of a mark is the newest version of each
    path along its lineage (workspace.selectors)."""

    branch = models.ForeignKey(
        "sessions_app.Branch", on_delete=models.CASCADE, related_name="file_versions"
    )
    # The branch's message count when it was written.
    position = models.PositiveIntegerField()
    path = models.CharField(max_length=WORKSPACE_PATH_MAX)
    blob = models.ForeignKey(
        WorkspaceBlob, null=True, blank=True, on_delete=models.RESTRICT, related_name="versions"
    )
    # The turn whose agent wrote it (null: a person, an import): a turn that fails or is
    # stopped loses its writes with its messages.
    turn = models.ForeignKey(
        "sessions_app.Turn", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(default=timezone.now)
    # by ("agent", "user", "api", "import"), tool_call_id, ...
    metadata = models.JSONField(default=dict, blank=True)

    class Meta:
        verbose_name = "file version"
        ordering: ClassVar[list[str]] = ["id"]
        indexes: ClassVar[list[models.Index]] = [
            models.Index(fields=["branch", "id"], name="fileversion_branch_id"),
            models.Index(fields=["branch", "path", "id"], name="fileversion_branch_path"),
            # The first version written after a message (a fork's or a rewind's cut).
            models.Index(fields=["branch", "position", "id"], name="fileversion_branch_position"),
        ]
        constraints: ClassVar[list[models.BaseConstraint]] = [
            time_in_range("created_at", name="fileversion_created_at_in_range"),
        ]

    def __str__(self) -> str:
        return f"{self.path} @ {self.position}"
