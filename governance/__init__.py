"""Governance: an administrator restores or rewinds a user's conversation on the user's behalf,
with a reason on record (`AuditRecord`), and the user is told (issue 26, item 4)."""
