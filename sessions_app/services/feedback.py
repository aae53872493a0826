"""A user's feedback on an assistant reply, kept with the message (sessions_app.feedback)."""

from __future__ import annotations

from django.db import transaction

from ..errors import MessageNotFound
from ..feedback import FEEDBACK_KEY, Feedback, check_rateable, clean_feedback
from ..models import Message


def _update_feedback(message: Message, feedback: Feedback | None) -> Message:
    """Set (or, with None, remove) the message's feedback under its row's lock, so a concurrent
    rating is never lost to a stale copy of the metadata. The message passed in is updated too."""
    with transaction.atomic():
        locked = Message.objects.select_for_update().filter(pk=message.pk).first()
        if locked is None:  # deleted meanwhile (a rewind, the session deleted)
            raise MessageNotFound()
        metadata = dict(locked.metadata) if isinstance(locked.metadata, dict) else {}
        if feedback is None:
            if FEEDBACK_KEY not in metadata:
                message.metadata = metadata
                return message
            del metadata[FEEDBACK_KEY]
        else:
            metadata[FEEDBACK_KEY] = dict(feedback)
        Message.objects.filter(pk=message.pk).update(metadata=metadata)
    message.metadata = metadata
    return message


def message_feedback_set(*, message: Message, rating: object, note: object = None) -> Message:
    """Rate the assistant reply `message` (one of its owner's, as looked up for them):
    "up" or "down", with an optional note (replacing any earlier feedback). A message of another
    role, a rating that is neither, or a note too long: InvalidInput, and nothing is stored."""
    check_rateable(message.role)
    return _update_feedback(message, clean_feedback(rating=rating, note=note))


def message_feedback_clear(*, message: Message) -> Message:
    """Take back the feedback on the assistant reply `message` (nothing happens if it had none)."""
    check_rateable(message.role)
    return _update_feedback(message, None)
