"""The session's workspace: text files that belong to a branch like its messages.

Its rows (`WorkspaceBlob`, `FileVersion`) are defined in sessions_app.models, next to the
branches, checkpoints and turns that refer to them; this package holds their operations: the
paths and limits (`validation`), the reads as of a point (`selectors`) and the writes
(`services`). It sits between `sessions_app` and `checkpoints`.
"""
