"""The close codes of the sockets (/ws/chat/ and /ws/v1/), the same whether a handshake is
refused or an open socket is closed. The chat page's live.js reconnects after some of them and
not after others (said at each)."""

from __future__ import annotations

from core.events.payloads import Ended

# Not signed in, or no longer: logged out, key revoked, user deactivated, login expired, password
# changed. The page does not reconnect.
CLOSE_SIGNED_OUT = 4401
# No such session of yours, or no longer yours (deleted, given away). The page does not reconnect.
CLOSE_NOT_FOUND = 4404
# Opened with an API key by a user whose access does not include the API (access.selectors).
# Not reconnected.
CLOSE_FORBIDDEN = 4403
# The login goes on under a new key (the password changed in this very login): reconnect, with
# the new cookie. (daphne sends 1000 or 3000-4999 only: the chat page's live.js reconnects after
# this code itself.)
CLOSE_RECONNECT = 4012
# The database or Redis does not answer: try again later, as HTTP's 503 (daphne sends no 1013).
# The page reconnects, with growing pauses (web.ws.unavailable).
CLOSE_UNAVAILABLE = 4503
# An error while checking a socket's access: the page's htmx reconnects after this code.
CLOSE_INTERNAL_ERROR = 1011

# The code of each way an access ends (core.events' close messages say which).
CLOSE_ENDED: dict[Ended, int] = {"signed_out": CLOSE_SIGNED_OUT, "not_found": CLOSE_NOT_FOUND}
