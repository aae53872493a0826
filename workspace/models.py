"""The workspace's rows, defined in sessions_app.models (see the package's docstring)."""

from sessions_app.models import FileVersion, WorkspaceBlob

__all__ = ["FileVersion", "WorkspaceBlob"]
