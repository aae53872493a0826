"""The Telegram bridge: a linked Telegram chat is a Rollback conversation (the user's session of
key `agent:telegram:per-peer:<chat_id>`), in both directions. TELEGRAM_BOT_TOKEN turns it on."""
