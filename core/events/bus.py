"""The bus: who hears an event, and how it gets to them.

An event goes, in this order, to the local listeners of its session and of every session (the
terminal chat, the Python API's `on_event`, the Telegram relay), to the waits on its turn
(`core.wake`), and to the channel group of its session, in every process (the sockets). Control
messages (closing sockets, a list or a page to refresh) go to their group only.

Sync code publishes to the channel layer through the one bridge (`core.bridge`), on one event
loop per process: the way to publish is chosen once, when the process first publishes (again
only if CHANNEL_LAYERS changes, as tests do), never probed per message. The in-memory layer
hands what it is given to the loop of its sockets itself (core.channel_layers). The caller waits
for each send, so one thread's events keep their order. Publishing never fails the caller: the
database has the truth, and a lost event must not lose the change.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import threading
from collections.abc import Callable, Sequence
from typing import Any

from channels.layers import get_channel_layer
from django.core.signals import setting_changed

from core import bridge, wake
from core.events.payloads import Event, EventMessage, LayerMessage

log = logging.getLogger(__name__)

PUBLISH_TIMEOUT = 10.0  # seconds a publisher waits for the channel layer to take a message


# --- the groups ---------------------------------------------------------------------------------


def group_name(session_id: int) -> str:
    """The sockets watching the session join it."""
    return f"rollback.session.{session_id}"


def user_group(user_id: int) -> str:
    """Every socket of the user joins it."""
    return f"rollback.user.{user_id}"


def apikey_group(key_id: int) -> str:
    """The sockets opened with that API key join it."""
    return f"rollback.apikey.{key_id}"


def login_group(session_key: str) -> str:
    """The sockets authenticated by that browser login (Django session) join it. The group is
    named by a hash of the session key, which is a secret."""
    return "rollback.login." + hashlib.sha256(session_key.encode()).hexdigest()[:40]


# --- the local listeners ------------------------------------------------------------------------

# Listeners of one session's events in this process (the terminal chat, the Python API's
# `on_event`), and of every session's (the Telegram relay).
_listeners: dict[int, list[Callable[[Event], None]]] = {}
_all_listeners: list[Callable[[Event], None]] = []
_listeners_lock = threading.Lock()  # turns on other threads send while listeners come and go


def listen(session_id: int, listener: Callable[[Event], None]) -> Callable[[], None]:
    """Call `listener` with each event of the session sent from this process; returns a
    function that stops it."""
    with _listeners_lock:
        _listeners.setdefault(session_id, []).append(listener)

    def stop() -> None:
        with _listeners_lock:
            listeners = _listeners.get(session_id, [])
            if listener in listeners:
                listeners.remove(listener)
            if not listeners:
                _listeners.pop(session_id, None)

    return stop


def listen_all(listener: Callable[[Event], None]) -> Callable[[], None]:
    """Call `listener` with each event of every session sent from this process, on the sending
    thread (it must be quick and must not block); returns a function that stops it."""
    with _listeners_lock:
        _all_listeners.append(listener)

    def stop() -> None:
        with _listeners_lock:
            if listener in _all_listeners:
                _all_listeners.remove(listener)

    return stop


# --- sending ------------------------------------------------------------------------------------


def send(event: Event, origin: str | None = None) -> None:
    """Send one event to everyone watching its session. Never fails the caller. `origin`: the
    tab whose request made the change (core.origin), for its own socket."""
    _deliver_here(event)
    message: EventMessage = {"type": "rollback.event", "event": event}
    if origin is not None:
        message["origin"] = origin
    publish(group_name(event["session"]), message, event["type"])


def send_many(sent: Sequence[Event]) -> None:
    """`send` for several events at once (the pieces of several replies, flushed together:
    sessions_app.reply_stream): each reaches this process's listeners and waits as `send`'s
    does, and the channel layer gets them all in one hand-off to the bridge, sent side by side
    (one thread hop, not one per event). Never fails the caller."""
    items: list[tuple[str, LayerMessage]] = []
    for event in sent:
        _deliver_here(event)
        items.append((group_name(event["session"]), {"type": "rollback.event", "event": event}))
    if items:
        publish_many(items, ", ".join(sorted({event["type"] for event in sent})))


def _deliver_here(event: Event) -> None:
    """The event to this process's listeners and to the waits on its turn."""
    session_id = event["session"]
    with _listeners_lock:
        listening = [*_listeners.get(session_id, ()), *_all_listeners]
    for listener in listening:
        try:
            listener(event)
        except Exception:
            log.exception("a listener failed on %s", event["type"])
    turn = event.get("turn")
    if isinstance(turn, int):
        wake.ring(event["type"], turn)  # the waits on the turn (core.wake)


# Sends messages, each to its group, and returns the exceptions of those that failed.
Publisher = Callable[[list[tuple[str, LayerMessage]]], list[BaseException]]

_publisher: Publisher | None = None
_publisher_lock = threading.Lock()


def _nowhere(items: list[tuple[str, LayerMessage]]) -> list[BaseException]:
    """No channel layer is configured: no socket to tell."""
    return []


def _choose_publisher() -> Publisher:
    layer: Any = get_channel_layer()
    if layer is None:
        return _nowhere

    async def side_by_side(items: list[tuple[str, LayerMessage]]) -> list[BaseException]:
        sent = await asyncio.gather(
            *(layer.group_send(group, message) for group, message in items),
            return_exceptions=True,
        )
        return [result for result in sent if isinstance(result, BaseException)]

    def through_the_bridge(items: list[tuple[str, LayerMessage]]) -> list[BaseException]:
        if len(items) == 1:
            bridge.call(layer.group_send, *items[0], timeout=PUBLISH_TIMEOUT)
            return []
        return bridge.call(side_by_side, items, timeout=PUBLISH_TIMEOUT)

    return through_the_bridge


def publisher() -> Publisher:
    """How this process publishes: chosen at its first publish, then kept."""
    global _publisher
    chosen = _publisher
    if chosen is None:
        with _publisher_lock:
            if _publisher is None:
                _publisher = _choose_publisher()
            chosen = _publisher
    return chosen


def _forget_publisher(*, setting: str, **kwargs: object) -> None:
    """CHANNEL_LAYERS changed (tests): channels makes a new layer, and the choice is made again."""
    global _publisher
    if setting == "CHANNEL_LAYERS":
        with _publisher_lock:
            _publisher = None


setting_changed.connect(_forget_publisher)


def publish(group: str, message: LayerMessage, what: str) -> None:
    """Send one message to a channel group, in every process. Never fails the caller."""
    publish_many([(group, message)], what)


def publish_many(items: list[tuple[str, LayerMessage]], what: str) -> None:
    """Send messages, each to its group, in every process, in one hand-off to the bridge.
    Never fails the caller."""
    try:
        failed = publisher()(items)
    except Exception:
        log.warning("could not publish %s to %s", what, ", ".join(g for g, _ in items))
        return
    if failed:
        log.warning("could not publish %d of %d %s: %r", len(failed), len(items), what, failed[0])
