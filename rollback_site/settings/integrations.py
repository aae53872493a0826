"""The Telegram bridge (integrations/telegram/)."""

from __future__ import annotations

from rollback_site.settings.env import env

# TELEGRAM_BOT_TOKEN turns it on. Telegram posts updates to /integrations/telegram/webhook/ with
# the header X-Telegram-Bot-Api-Secret-Token, which must equal TELEGRAM_WEBHOOK_SECRET (without a
# secret every update is refused). Replies go to TELEGRAM_API_URL (Telegram's own by default).
TELEGRAM_BOT_TOKEN = env.TELEGRAM_BOT_TOKEN
TELEGRAM_WEBHOOK_SECRET = env.TELEGRAM_WEBHOOK_SECRET
TELEGRAM_API_URL = env.TELEGRAM_API_URL.rstrip("/")
# A reply streams into its chat by edits, at most one per TELEGRAM_EDIT_SECONDS per chat
# (Telegram allows about one a second; the tests shorten it).
TELEGRAM_EDIT_SECONDS = env.TELEGRAM_EDIT_SECONDS
# An update the webhook stored that no task handled (the broker was down when it came, or its
# task was lost) is handled by the periodic sweep once it is TELEGRAM_UPDATE_RETRY_SECONDS old:
# beat runs the sweep that often (without a broker, the web process's recovery thread runs it every
# TURN_RECOVERY_SECONDS). A handler that claimed an update and never ended (its process died, the
# database failed) is taken over after TELEGRAM_UPDATE_CLAIM_SECONDS, up to TELEGRAM_UPDATE_ATTEMPTS
# claims in all; then the update is given up, with an error in the log. (Beat's schedule of the
# sweep: workers.py.)
TELEGRAM_UPDATE_RETRY_SECONDS = env.TELEGRAM_UPDATE_RETRY_SECONDS
TELEGRAM_UPDATE_CLAIM_SECONDS = env.TELEGRAM_UPDATE_CLAIM_SECONDS
TELEGRAM_UPDATE_ATTEMPTS = env.TELEGRAM_UPDATE_ATTEMPTS
# Link codes (`/start CODE`): at most TELEGRAM_LINK_ATTEMPTS_PER_CHAT attempts from one chat, and
# TELEGRAM_LINK_ATTEMPTS_PER_USER from one Telegram user in all their chats, within
# TELEGRAM_LINK_WINDOW_SECONDS of the first (a code that links clears the count). Past either, the
# chat is told once when it may try again, and later attempts are dropped by the webhook without a
# task or an answer. 0 turns a limit off.
TELEGRAM_LINK_ATTEMPTS_PER_CHAT = env.TELEGRAM_LINK_ATTEMPTS_PER_CHAT
TELEGRAM_LINK_ATTEMPTS_PER_USER = env.TELEGRAM_LINK_ATTEMPTS_PER_USER
TELEGRAM_LINK_WINDOW_SECONDS = env.TELEGRAM_LINK_WINDOW_SECONDS
# The bot's username (@ optional), when set: the profile's link code comes with a link that
# opens the bot's chat and sends `/start CODE` in one tap (https://t.me/<username>?start=<code>).
# One Telegram would not give stops the start (env.py).
TELEGRAM_BOT_USERNAME = env.TELEGRAM_BOT_USERNAME
