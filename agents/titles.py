"""Automatic titles: once a session still called "New session" has its first answered exchange
(a failed or stopped one does not count), the model names it.

The title is a separate, small request (TITLE_MAX_TOKENS, through agents.model.ask_once), like
the summaries of agents.context, made after the turn has finished, so the reply is never held up
and a failure costs nothing but the title: it is logged, and the next turn (of the first
TITLE_TURNS exchanges) tries again. A name the user gives meanwhile always wins
(sessions_app.services.session_title_set). The offline demo model answers these requests too
(agents.markers.TITLE_MARKER).
"""

from __future__ import annotations

import logging
import re

from core.validation import NAME_MAX_LENGTH
from sessions_app.models import Session, Turn
from sessions_app.services import DEFAULT_SESSION_NAME, session_title_set

from .markers import TITLE_MARKER
from .model import ChargeTo, ask_once, build_model, default_model_for

log = logging.getLogger(__name__)

TITLE_MAX_TOKENS = 20
TITLE_MAX_CHARS = 80
TITLE_TURNS = 3  # an untitled session is titled after one of its first exchanges, not later
EXCERPT_CHARS = 600

TITLE_INSTRUCTIONS = (
    f"{TITLE_MARKER}. You get the start of a conversation. Answer with its title only: at most "
    "six words, in the conversation's language, no quotes, no final full stop."
)


def clean_title(text: str) -> str:
    """The model's answer as a session name: one line, without quotes, markup or a final full
    stop, at most TITLE_MAX_CHARS characters; "" when nothing usable is left."""
    line = next((part for part in text.strip().splitlines() if part.strip()), "")
    line = re.sub(r"^(title|titre)\s*:\s*", "", line.strip(), flags=re.I)
    line = re.sub(r"\s+", " ", line.strip(" \t*#`\"'“”‘’«»"))
    line = line.rstrip(" .")
    line = "".join(c for c in line if c.isprintable())
    if len(line) > TITLE_MAX_CHARS:
        line = line[: TITLE_MAX_CHARS - 1].rstrip() + "…"
    return line[:NAME_MAX_LENGTH]


def _excerpt(text: str) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= EXCERPT_CHARS else flat[:EXCERPT_CHARS] + "…"


def wants_title(turn: Turn) -> bool:
    """Whether the turn just answered is one of the first TITLE_TURNS answered exchanges of a
    session still named DEFAULT_SESSION_NAME. Counted in turns that ended `done`, not in
    positions: exchanges whose reply failed (or was stopped) before it do not use up the
    chances, so a session whose first reply failed is titled by the next one that succeeds."""
    if turn.status != Turn.Status.DONE:
        return False
    if Turn.session.is_cached(turn) and turn.session.session_name != DEFAULT_SESSION_NAME:
        return False  # named when the turn was claimed: a name is never taken back
    name = Session.objects.filter(pk=turn.session_id).values_list("session_name", flat=True).first()
    if name != DEFAULT_SESSION_NAME:  # named already: no more queries
        return False
    answered_before = Turn.objects.filter(
        session_id=turn.session_id, status=Turn.Status.DONE, pk__lt=turn.pk
    ).count()
    # The reply is read through its message: only for a session that wants a title.
    return answered_before < TITLE_TURNS and bool(turn.reply.strip())


def session_autotitle(turn: Turn) -> str | None:
    """Ask the model for the title of the turn's session and store it; the title, or None when
    none was wanted or the model gave none. Never raises: a title is not worth a failure."""
    try:
        if not wants_title(turn):
            return None
        session = Session.objects.get(pk=turn.session_id)
        prompt = f"user: {_excerpt(turn.message)}\nassistant: {_excerpt(turn.reply)}"
        model = build_model(
            session.settings,
            default_id=default_model_for(session.owner),
            max_tokens=TITLE_MAX_TOKENS,
        )
        charge = ChargeTo(
            user_id=session.owner_id,
            session_id=session.pk,
            kind="title",
            branch_id=turn.branch_id,
            turn_id=turn.pk,
        )
        answered, content = ask_once(model, TITLE_INSTRUCTIONS, prompt, charge=charge)
        title = clean_title(content) if answered else ""
        if not title:
            log.warning("no title for session %s: %s", session.pk, content.strip()[:200])
            return None
        return title if session_title_set(session=session, title=title) is not None else None
    except Exception:
        log.exception("could not title the session of turn %s", turn.pk)
        return None
