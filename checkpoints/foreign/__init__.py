"""Bring your history: conversations exported by ChatGPT (`conversations.json`), Open WebUI and
LibreChat imported as sessions, each conversation's tree of edits and regenerations as branches.

- `formats`: each export read into one neutral shape (a conversation: its nodes, their parents,
  which is current, and what was left out, counted by kind); no database.
- `tree`: a conversation's tree checked (no cycle, no missing parent, within bounds) and planned as
  branches: the current path first, every other leaf a branch forked where it parts from one
  already planned (sharing the history below its fork point: no message copied).
- `services`: the entry point (`history_import`: one conversation at once, several as a job),
  one conversation written in its own transaction, and the job's run (`import_job_run`).
"""
