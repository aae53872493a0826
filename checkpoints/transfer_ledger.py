"""The effects ledger in a session's export document, and its import (used by
checkpoints.transfer and checkpoints.transfer_doc).

The document holds `effects`: the session's ledger entries (sessions_app.models.ledger), oldest
first, each as `id` (the exporting server's, to name it), `branch` (the id of a branch of the
document, or null when the exporting session no longer had that branch), `position` (where in
its branch's history the call was), `message` (the position of its tool message among that
branch's own messages, or null when the message is gone: a rewind cut it, or the turn stopped
before storing it), `tool_name`, `tool_args`, `tool_result`, `status` (`ran`, `failed`,
`may_have_run`) and `created_at`. Import maps each entry onto the new session's branch and tool
message, keeps a null reference null, and gives it no turn (turns do not travel). A document
from before the ledger has no `effects` and still imports, with an empty ledger.

An entry is checked as this server would have written it (its texts within LEDGER_TEXT_LIMIT,
its status one of the three, its branch and message in the document); a bad entry refuses the
whole document with a 400 naming it, and nothing is written.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Literal

from django.db.models import Subquery
from django.utils import timezone
from pydantic import BaseModel, ConfigDict, Field, StrictInt, StrictStr

from core.errors import InvalidInput
from core.validation import clean_json, clean_past_time, storable_json, storable_text
from sessions_app.errors import ImportRejected
from sessions_app.models import LEDGER_TEXT_LIMIT, LedgerEntry, Message, Session
from sessions_app.turns.texts import bounded, bounded_json

# The largest value of the ledger's PositiveIntegerField (position) on every database.
_POSITION_MAX = 2**31 - 1


class EffectDoc(BaseModel):
    """One entry of the effects ledger in the document. Types are strict: "3" is not 3."""

    model_config = ConfigDict(extra="forbid")

    id: StrictInt
    branch: StrictInt | None = None
    position: StrictInt = Field(ge=0, le=_POSITION_MAX)
    message: StrictInt | None = Field(default=None, ge=0, le=_POSITION_MAX)
    tool_name: StrictStr = Field(min_length=1, max_length=200)
    tool_args: Any = None
    tool_result: StrictStr = ""
    status: Literal["ran", "failed", "may_have_run"]
    created_at: datetime | None = None


@dataclass(frozen=True)
class BranchMessages:
    """What the checks need of a branch of the document: its own messages' first position and
    their roles, in order."""

    fork_position: int
    roles: list[str]

    def role_at(self, position: int) -> str | None:
        i = position - self.fork_position
        return self.roles[i] if 0 <= i < len(self.roles) else None


def _iso(value: datetime) -> str:
    return value.astimezone(UTC).isoformat().replace("+00:00", "Z")


def ledger_export(session: Session, branch_ids: set[int]) -> list[dict[str, Any]]:
    """The session's ledger for the document, oldest first. `branch_ids`: the branches the
    document holds. Two queries, whatever the ledger's length."""
    entries = LedgerEntry.objects.filter(session=session).order_by("id")
    # The entries' tool messages still in the history: where each stands.
    live = {
        pk: (branch_id, position)
        for pk, branch_id, position in Message.objects.filter(
            branch__session=session,
            role=Message.Role.TOOL,
            pk__in=Subquery(entries.order_by().values("message_ref")),
        ).values_list("pk", "branch_id", "position")
    }
    out = []
    for e in entries.iterator(chunk_size=2000):
        branch = e.branch_ref if e.branch_ref in branch_ids else None
        place = live.get(e.message_ref) if e.message_ref is not None else None
        message = place[1] if place is not None and place[0] == branch else None
        out.append(
            {
                "id": e.pk,
                "branch": branch,
                "position": e.position,
                "message": message,
                "tool_name": e.tool_name,
                "tool_args": e.tool_args,
                "tool_result": e.tool_result,
                "status": e.status,
                "created_at": _iso(e.created_at),
            }
        )
    return out


def effects_check(effects: list[EffectDoc], branches: dict[int, BranchMessages]) -> None:
    """Each entry as this server would have written it, its branch and tool message in the
    document (`branches`: the document's, by id). ImportRejected names the first bad one."""
    seen: set[int] = set()
    for i, e in enumerate(effects):
        where = f"effects entry {i} (id {e.id})"
        if e.id in seen:
            raise ImportRejected(f"Cannot import this document: {where}: its id appears twice.")
        seen.add(e.id)
        try:
            _check_entry(e, branches, where)
        except InvalidInput as exc:
            raise ImportRejected(f"Cannot import this document: {exc.message}") from None


def _check_entry(e: EffectDoc, branches: dict[int, BranchMessages], where: str) -> None:
    if e.branch is not None and e.branch not in branches:
        raise InvalidInput(f"{where} names branch {e.branch}, which is not in the document.")
    if e.message is not None:
        if e.branch is None:
            raise InvalidInput(f"{where} names a message but no branch.")
        role = branches[e.branch].role_at(e.message)
        if role != Message.Role.TOOL:
            raise InvalidInput(
                f"{where} names message {e.message} of branch {e.branch}, "
                + ("which is not a tool message." if role else "which is not in the document.")
            )
    if e.created_at is not None:
        clean_past_time(e.created_at, what=f"created_at of {where}")
    clean_json(e.tool_args, what=f"tool_args of {where}")
    limit = LEDGER_TEXT_LIMIT
    if bounded(e.tool_result, limit) != e.tool_result:
        raise InvalidInput(
            f"The tool_result of {where} is {len(e.tool_result)} characters long; "
            f"the limit is {limit}."
        )
    # An entry's arguments cut off at the limit, as ledger_record writes them, are within it.
    one = isinstance(e.tool_args, dict) and len(e.tool_args) == 1
    cut = e.tool_args.get("cut_off") if one else None
    cut_ok = isinstance(cut, str) and bounded(cut, limit) == cut
    if bounded_json(e.tool_args, limit) != e.tool_args and not cut_ok:
        raise InvalidInput(f"The tool_args of {where} are longer than {limit} characters as JSON.")


def ledger_import(
    *, session: Session, effects: list[EffectDoc], branch_ids: dict[int, int]
) -> list[LedgerEntry]:
    """The document's entries as the new session's ledger, in the document's order, each on
    the new branch and tool message it names (`branch_ids`: document id -> new id), with no
    turn. Call after the messages are written, in the import's transaction."""
    if not effects:
        return []
    messages = _imported_messages(effects, branch_ids)
    entries = [
        LedgerEntry(
            session=session,
            user_id=session.owner_id,
            branch_ref=branch_ids[e.branch] if e.branch is not None else None,
            turn_ref=None,
            message_ref=messages.get((e.branch, e.message)) if e.message is not None else None,
            position=e.position,
            tool_name=storable_text(e.tool_name),
            tool_args=storable_json(e.tool_args),
            tool_result=storable_text(e.tool_result),
            status=e.status,
            created_at=_when(e.created_at),
        )
        for e in effects
    ]
    return LedgerEntry.objects.bulk_create(entries, batch_size=1000)


def _imported_messages(
    effects: list[EffectDoc], branch_ids: dict[int, int]
) -> dict[tuple[int | None, int], int]:
    """The new ids of the tool messages the entries name, by (document branch, position): one
    range of the (branch, position) index per branch that has any."""
    wanted: dict[int, set[int]] = {}
    for e in effects:
        if e.branch is not None and e.message is not None:
            wanted.setdefault(e.branch, set()).add(e.message)
    found: dict[tuple[int | None, int], int] = {}
    for doc_branch, positions in wanted.items():
        rows = Message.objects.filter(
            branch_id=branch_ids[doc_branch],
            role=Message.Role.TOOL,
            position__gte=min(positions),
            position__lte=max(positions),
        ).values_list("position", "pk")
        found.update({(doc_branch, p): pk for p, pk in rows if p in positions})
    return found


def _when(value: datetime | None) -> datetime:
    if value is None:
        return timezone.now()
    return value if timezone.is_aware(value) else value.replace(tzinfo=UTC)
