"""Celery (its broker is Redis when REDIS_URL is set, else tasks run in process), the turns a
worker runs and their recovery, and the periodic jobs: beat's schedule, the retention rules."""

from __future__ import annotations

from typing import Any

from rollback_site.settings.env import env
from rollback_site.settings.stores import REDIS_COMMAND_TIMEOUT, REDIS_CONNECT_TIMEOUT, REDIS_URL

if REDIS_URL:
    CELERY_BROKER_URL = REDIS_URL
    CELERY_BROKER_CONNECTION_TIMEOUT = REDIS_CONNECT_TIMEOUT
    CELERY_BROKER_TRANSPORT_OPTIONS = {
        "socket_connect_timeout": REDIS_CONNECT_TIMEOUT,
        "socket_timeout": REDIS_COMMAND_TIMEOUT,
    }
    # Sending a task tries twice at most, not four times: a request waits seconds, not half a
    # minute, for a broker that does not answer.
    CELERY_TASK_PUBLISH_RETRY_POLICY = {
        "max_retries": 1,
        "interval_start": 0,
        "interval_step": 0.2,
        "interval_max": 0.2,
    }
    CELERY_TASK_ALWAYS_EAGER = False
else:
    CELERY_BROKER_URL = "memory://"
    # No broker: tasks run in the process that enqueues them.
    CELERY_TASK_ALWAYS_EAGER = True
    CELERY_TASK_EAGER_PROPAGATES = True

CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_TASK_SERIALIZER = "json"
CELERY_ACCEPT_CONTENT = ["json"]
CELERY_TIMEZONE = "UTC"

# --- Turns and their recovery -------------------------------------------------------------------
# A worker running a turn touches its heartbeat every TURN_HEARTBEAT_SECONDS, on a thread of its
# own, however slow the model. A running turn with no heartbeat for AGENT_TURN_STALE_SECONDS lost
# its worker: the recovery job (every TURN_RECOVERY_SECONDS) queues it again for another worker,
# up to AGENT_TURN_ATTEMPTS claims in all, then fails it. A queued turn no worker has claimed for
# TURN_QUEUE_TIMEOUT is failed too (it was sent again meanwhile, see TURN_REDISPATCH_SECONDS).
# Either way the user's message stays.
TURN_HEARTBEAT_SECONDS = env.TURN_HEARTBEAT_SECONDS
AGENT_TURN_STALE_SECONDS = env.AGENT_TURN_STALE_SECONDS
AGENT_TURN_ATTEMPTS = env.AGENT_TURN_ATTEMPTS
TURN_RECOVERY_SECONDS = env.TURN_RECOVERY_SECONDS
TURN_QUEUE_TIMEOUT = env.TURN_QUEUE_TIMEOUT
# A queued turn no worker has claimed for TURN_REDISPATCH_SECONDS is sent to the workers again by
# the recovery job: its task may be lost (a message the broker dropped, a worker that died before
# claiming it, a broker that was down when it was sent). A task that was merely slow then finds
# the turn claimed and does nothing. So a lost turn runs within this plus TURN_RECOVERY_SECONDS.
TURN_REDISPATCH_SECONDS = env.TURN_REDISPATCH_SECONDS
# While it runs a turn, the worker looks this often whether the user stopped it (Stop, or
# POST /api/v1/turns/{id}/cancel/), then closes the model's stream.
TURN_STOP_POLL_SECONDS = env.TURN_STOP_POLL_SECONDS
# A tool call that needs its owner's approval waits at most this long (the turn at
# `awaiting_approval`, its worker's heartbeat going on); then it counts as refused ("timed_out").
AGENT_APPROVAL_SECONDS = env.AGENT_APPROVAL_SECONDS

# --- Periodic jobs --------------------------------------------------------------------------------
# `celery -A rollback_site beat` runs them, from schedules kept in the database
# (django-celery-beat) and edited in the admin under "Periodic tasks". The retention rules
# (ops.retention) are scheduled there by a migration, each nightly; the recovery of turns is
# infrastructure and scheduled here, and so are the Telegram bridge's (integrations.py).
CELERY_BEAT_SCHEDULER = "ops.beat:Scheduler"
CELERY_BEAT_SCHEDULE: dict[str, dict[str, Any]] = {
    # Take over or fail turns whose worker died (see TURN_HEARTBEAT_SECONDS above). A run that
    # no worker picked up in time is dropped, not stacked behind the next one.
    "recover-turns": {
        "task": "agents.recover_turns",
        "schedule": TURN_RECOVERY_SECONDS,
        "options": {"expires": 30},
    },
    # The MCP servers' tool catalogues, listed again (agents.mcp.catalogue).
    "mcp-catalogue": {
        "task": "agents.refresh_mcp_catalogues",
        "schedule": max(10.0, env.AGENT_MCP_REFRESH_SECONDS),
        "options": {"expires": 60},
    },
    # The Telegram bridge's replies no relay delivered (the process that ran the turn died
    # between its end and the delivery); nothing to do, and no query, while it is off.
    "telegram-replies": {
        "task": "integrations.deliver_replies",
        "schedule": 60.0,
        "options": {"expires": 30},
    },
    # The updates no task handled, once TELEGRAM_UPDATE_RETRY_SECONDS old (integrations.py).
    "telegram-updates": {
        "task": "integrations.sweep_updates",
        "schedule": max(1.0, env.TELEGRAM_UPDATE_RETRY_SECONDS),
        "options": {"expires": 30},
    },
}

# --- Retention (ops.retention; each rule is also a management command with --dry-run) ----------
# Automatic checkpoints older than RETENTION_AUTO_CHECKPOINT_DAYS are deleted, always keeping the
# newest RETENTION_KEEP_LATEST_AUTO of each branch, every named checkpoint and every checkpoint a
# branch was forked from. Sessions untouched for RETENTION_ARCHIVE_DAYS are archived (never
# deleted). 0 days turns a rule off. A value that is negative or not a number stops the start.
RETENTION_AUTO_CHECKPOINT_DAYS = env.RETENTION_AUTO_CHECKPOINT_DAYS
RETENTION_KEEP_LATEST_AUTO = env.RETENTION_KEEP_LATEST_AUTO
RETENTION_ARCHIVE_DAYS = env.RETENTION_ARCHIVE_DAYS
