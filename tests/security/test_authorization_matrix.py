"""The authorisation matrix: every route of the project, who may use it, and proof that nobody
else can.

The routes are read from the project itself (the root URLconf, with the admin's and the API's
included, and the WebSocket routes), and each one needs a rule in the tables below; a new route
without a rule fails `test_every_route_has_a_rule` ("add a rule for ..."). A rule says:

- public: anyone (log in, sign up, the API schema and docs, the admin's log-in page);
- login: any signed-in user, on their own data only;
- owner: the route takes the id of a user's object: anonymous visitors are sent to log in (401
  on the API, a closed socket), another user gets a 404 (a closed socket, without an event);
- staff: the admin site: anonymous visitors and users who are not staff are sent to the admin's
  log-in page;
- model: an admin page of one model: also refused (403) to staff without the model's permission.

Each route is filled with the ids of alice's real objects and tried with every method, as bob
(browser session with a valid CSRF token, and Bearer key on the API), as an anonymous visitor,
and on the admin as a staff member without permissions. After every request alice's rows (and
everyone's privileges and the site settings) must be exactly as before, and no answer may show
her data. Then the owner (alice, or the superuser on the admin) makes the same requests and is
served: the ids are right, the methods are the ones the route answers, and the refusals above
are real refusals, not a wrong address or a CSRF failure.
"""

from __future__ import annotations

import base64
import json
import re
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlencode

import pytest
from asgiref.sync import async_to_sync
from channels.db import database_sync_to_async
from django.contrib import admin
from django.contrib.auth.models import Group
from django.contrib.contenttypes.models import ContentType
from django.db import connection
from django.urls import URLPattern, URLResolver, get_resolver
from django.utils import timezone
from django_celery_beat.models import (
    ClockedSchedule,
    CrontabSchedule,
    IntervalSchedule,
    PeriodicTask,
    SolarSchedule,
)

from access.models import AccessRule
from accounts.models import ApiKey, SiteSettings, User
from accounts.services import apikey_create, apikey_revoke
from agents.models import McpCredential, McpServer
from checkpoints.models import Checkpoint, ImportJob
from checkpoints.services import checkpoint_create
from core import events
from governance.models import AuditRecord as GovernanceRecord
from integrations.models import TelegramChat, TelegramLinkCode
from memories.models import Memory
from memories.services import memory_create
from ops.models import AuditRecord
from sessions_app.models import Branch, LedgerEntry, Message, Session, Turn
from sessions_app.selectors import current_branch
from sessions_app.services import (
    branch_fork,
    message_append,
    message_feedback_set,
    session_create,
    summary_store,
)
from sessions_app.turns import turn_fail, turn_start
from sharing.models import ShareLink
from sharing.services import share_create
from tests.fakes.mcp_server import tiny_png
from tests.security.conftest import bearer, browser, cookie_headers
from usage.models import Budget, ModelPrice, UsageRecord
from usage.services import usage_record
from web.ws.routing import websocket_urlpatterns
from workspace.models import FileVersion
from workspace.services import file_write

pytestmark = pytest.mark.django_db

SECRET = "alice-secret-5f1c"  # in every name and text of alice's; nobody else may ever see it  # noqa: S105 - a test user's password
ALL = ("GET", "POST", "PUT", "PATCH", "DELETE")
# Alice's own requests run in this order, so a DELETE does not remove what a GET needs.
OWNER_ORDER = ("GET", "PUT", "PATCH", "POST", "DELETE")

ALICES_KEY = "agent:shket:main:12345"
PNG_BYTES = tiny_png()
PNG = base64.b64encode(PNG_BYTES).decode()
PUBLIC, LOGIN, OWNER, STAFF, MODEL = "public", "login", "owner", "staff", "model"


@dataclass(frozen=True)
class Rule:
    access: str
    methods: tuple[str, ...]  # what the route answers (the rest: 405)
    params: dict[str, str] = field(default_factory=dict)  # URL parameter -> one of alice's objects
    data: dict[str, Any] = field(default_factory=dict)  # the body of a POST, PUT or PATCH
    url: str | None = None  # the address to try, for a route that is a regular expression
    answers: tuple[int, ...] = ()  # the owner's statuses, when not simply "served"
    to: str = ""  # where the owner is redirected (the end of the address)
    away: str = ""  # a public page that sends a signed-in user here, whatever the method


@pytest.fixture(autouse=True)
def _telegram_bridge_on(settings):
    """The Telegram bridge on (its routes answer; with the bridge off they are 404s), its
    webhook's secret one nobody here sends."""
    settings.TELEGRAM_BOT_TOKEN = "123:matrix-token"  # noqa: S105 - a test value
    settings.TELEGRAM_WEBHOOK_SECRET = "matrix-secret"  # noqa: S105 - a test value


# --- The rules ---------------------------------------------------------------------------------

PAGE_RULES: dict[str, Rule] = {
    "/": Rule(PUBLIC, ALL),
    # Accounts.
    "/accounts/signup/": Rule(
        PUBLIC, ALL, data={"username": "eve", "password": "x"}, away="/chat/"
    ),
    "/accounts/login/": Rule(
        PUBLIC, ("GET", "POST", "PUT"), data={"username": "alice"}, away="/chat/"
    ),
    "/accounts/logout/": Rule(PUBLIC, ("POST",), answers=(302,)),
    # Single sign-on's pages: not found while it is off (tests/sso try them on).
    "/accounts/sso/": Rule(PUBLIC, ("GET",), answers=(404,)),
    "/accounts/sso/callback/": Rule(PUBLIC, ("GET",), answers=(404,)),
    "/accounts/password/": Rule(
        LOGIN, ("GET", "POST", "PUT"), data={"old_password": "x", "new_password1": "y"}
    ),
    "/accounts/profile/": Rule(LOGIN, ALL, data={"theme": "dark"}),
    # One's own usage, for a period (issue 40 item 5); bob's shows none of alice's.
    "/accounts/usage/": Rule(LOGIN, ("GET",)),
    "/accounts/profile/api-keys/": Rule(LOGIN, ("POST",), data={"name": "bob's key"}),
    "/accounts/profile/api-keys/<int:key_id>/revoke/": Rule(OWNER, ("POST",), {"key_id": "key"}),
    # The Telegram section: a link code of one's own; unlinking one's own chat.
    "/accounts/profile/telegram/link/": Rule(LOGIN, ("POST",)),
    "/accounts/profile/telegram/<int:chat_pk>/unlink/": Rule(
        OWNER, ("POST",), {"chat_pk": "telegram_chat"}
    ),
    # Telegram's webhook: only with the secret header (which nobody here has).
    "/integrations/telegram/webhook/": Rule(PUBLIC, ("POST",), answers=(403,)),
    # The chat.
    "/chat/": Rule(LOGIN, ("GET",)),
    "/chat/new/": Rule(LOGIN, ("POST",), data={"name": "bob's"}),
    "/chat/import/": Rule(LOGIN, ("POST",)),
    # An import job's progress (an export of several conversations).
    "/chat/imports/<int:pk>/": Rule(OWNER, ("GET",), {"pk": "import_job"}),
    "/chat/sessions/": Rule(LOGIN, ("GET",)),
    "/chat/<int:pk>/": Rule(OWNER, ("GET",), {"pk": "session"}),
    "/chat/<int:pk>/rename/": Rule(OWNER, ("GET", "POST"), {"pk": "session"}, {"name": "pwned"}),
    "/chat/<int:pk>/archive/": Rule(OWNER, ("POST",), {"pk": "session"}),
    # The chat's Tools menu (MCP servers on or off in the session, one's own credentials), and
    # the profile's credentials for a server: a server bob may not use is a 404 like a session.
    "/chat/<int:pk>/tools/": Rule(
        OWNER, ("GET", "POST"), {"pk": "session"}, {"server": "tracker", "on": "true"}
    ),
    "/chat/<int:pk>/tools/<str:name>/credentials/": Rule(
        OWNER,
        ("POST",),
        {"pk": "session", "name": "mcp_private_name"},
        {"header:Authorization": "Bearer pwned"},
    ),
    "/accounts/profile/mcp/<str:name>/": Rule(
        OWNER, ("POST",), {"name": "mcp_private_name"}, {"header:Authorization": "Bearer pwned"}
    ),
    "/accounts/profile/mcp/<str:name>/remove/": Rule(
        OWNER, ("POST",), {"name": "mcp_private_name"}
    ),
    "/chat/<int:pk>/unarchive/": Rule(OWNER, ("POST",), {"pk": "session"}),
    "/chat/<int:pk>/pin/": Rule(OWNER, ("POST",), {"pk": "session"}),
    "/chat/<int:pk>/unpin/": Rule(OWNER, ("POST",), {"pk": "session"}),
    "/chat/<int:pk>/delete/": Rule(OWNER, ("POST",), {"pk": "session"}),
    "/chat/<int:pk>/settings/": Rule(
        OWNER, ("GET", "POST"), {"pk": "session"}, {"instructions": "pwned"}
    ),
    "/chat/<int:pk>/export/": Rule(OWNER, ("GET",), {"pk": "session"}),
    "/chat/<int:pk>/messages/": Rule(OWNER, ("GET",), {"pk": "session"}),
    "/chat/<int:pk>/refresh/": Rule(OWNER, ("GET",), {"pk": "session"}),
    "/chat/<int:pk>/messages/later/": Rule(OWNER, ("GET",), {"pk": "session"}),
    "/chat/<int:pk>/search/": Rule(OWNER, ("GET",), {"pk": "session"}),
    "/chat/<int:pk>/send/": Rule(OWNER, ("POST",), {"pk": "session"}, {"message": "pwned"}),
    "/chat/<int:pk>/turns/<int:turn_id>/retry/": Rule(
        OWNER, ("POST",), {"pk": "session", "turn_id": "turn"}
    ),
    "/chat/<int:pk>/turns/<int:turn_id>/cancel/": Rule(
        OWNER, ("POST",), {"pk": "session", "turn_id": "turn"}
    ),
    "/chat/<int:pk>/messages/<int:message_id>/edit/": Rule(
        OWNER, ("GET",), {"pk": "session", "message_id": "user_message"}
    ),
    "/chat/<int:pk>/messages/<int:message_id>/resend/": Rule(
        OWNER, ("POST",), {"pk": "session", "message_id": "user_message"}, {"message": "pwned"}
    ),
    "/chat/<int:pk>/messages/<int:message_id>/regenerate/": Rule(
        OWNER, ("POST",), {"pk": "session", "message_id": "assistant_message"}
    ),
    "/chat/<int:pk>/messages/<int:message_id>/feedback/": Rule(
        OWNER, ("POST",), {"pk": "session", "message_id": "assistant_message"}, {"rating": "up"}
    ),
    # Alice's reply is not cut off: she is told so (outside htmx, a notice on the chat page).
    "/chat/<int:pk>/messages/<int:message_id>/continue/": Rule(
        OWNER,
        ("POST",),
        {"pk": "session", "message_id": "assistant_message"},
        answers=(302,),
        to="/chat/",
    ),
    "/chat/<int:pk>/messages/<int:message_id>/images/<int:index>/": Rule(
        OWNER, ("GET",), {"pk": "session", "message_id": "tool_message", "index": "image_index"}
    ),
    "/chat/<int:pk>/messages/<int:message_id>/branch/": Rule(
        OWNER, ("POST",), {"pk": "session", "message_id": "user_message"}
    ),
    # Another branch read in place (`branch` is not current), and its "Continue here".
    "/chat/<int:pk>/branches/<int:branch_id>/": Rule(
        OWNER, ("GET",), {"pk": "session", "branch_id": "branch"}
    ),
    "/chat/<int:pk>/branches/<int:branch_id>/continue/": Rule(
        OWNER, ("POST",), {"pk": "session", "branch_id": "branch"}, answers=(302,)
    ),
    "/chat/<int:pk>/branches/<int:branch_id>/activate/": Rule(
        OWNER, ("POST",), {"pk": "session", "branch_id": "branch"}
    ),
    "/chat/<int:pk>/branches/<int:branch_id>/rename/": Rule(
        OWNER, ("POST",), {"pk": "session", "branch_id": "branch"}, {"name": "pwned"}
    ),
    "/chat/<int:pk>/checkpoints/": Rule(
        OWNER, ("POST",), {"pk": "session"}, {"name": "pwned", "description": "pwned"}
    ),
    "/chat/<int:pk>/checkpoints/list/": Rule(OWNER, ("GET",), {"pk": "session"}),
    # Compare: without refs, the picker alone; its lists for the panel.
    "/chat/<int:pk>/compare/": Rule(OWNER, ("GET",), {"pk": "session"}),
    "/chat/<int:pk>/compare/points/": Rule(OWNER, ("GET",), {"pk": "session"}),
    # Approving a tool call (alice's turn waits for none: she is answered 409).
    "/chat/<int:pk>/turns/<int:turn_id>/approve/": Rule(
        OWNER,
        ("POST",),
        {"pk": "session", "turn_id": "turn"},
        {"tool_call_id": "call_1", "approved": "true"},
    ),
    # The Files panel.
    "/chat/<int:pk>/files/": Rule(OWNER, ("GET",), {"pk": "session"}),
    "/chat/<int:pk>/files/tree/": Rule(OWNER, ("GET",), {"pk": "session"}),
    "/chat/<int:pk>/files/upload/": Rule(OWNER, ("POST",), {"pk": "session"}, {"folder": ""}),
    "/chat/<int:pk>/files/view/<path:path>": Rule(
        OWNER, ("GET",), {"pk": "session", "path": "file"}
    ),
    "/chat/<int:pk>/files/download/<path:path>": Rule(
        OWNER, ("GET",), {"pk": "session", "path": "file"}
    ),
    "/chat/<int:pk>/files/image/<path:path>": Rule(
        OWNER, ("GET",), {"pk": "session", "path": "image_file"}
    ),
    "/chat/<int:pk>/files/delete/<path:path>": Rule(
        OWNER, ("POST",), {"pk": "session", "path": "file"}
    ),
    "/chat/checkpoints/<int:cp_id>/": Rule(OWNER, ("GET",), {"cp_id": "checkpoint"}),
    "/chat/checkpoints/<int:cp_id>/delete/": Rule(OWNER, ("POST",), {"cp_id": "checkpoint"}),
    "/chat/checkpoints/<int:cp_id>/restore/": Rule(
        OWNER, ("GET", "POST"), {"cp_id": "checkpoint"}, {"mode": "rewind"}
    ),
    # "Show in conversation" for a checkpoint on another branch: its branch made current.
    "/chat/checkpoints/<int:cp_id>/branch/": Rule(
        OWNER, ("POST",), {"cp_id": "checkpoint"}, answers=(302,)
    ),
    # Dismiss an administrator's notice (governance): the session's owner only.
    "/chat/<int:pk>/admin-notices/<int:notice_id>/dismiss/": Rule(
        OWNER, ("POST",), {"pk": "session", "notice_id": "governance_record"}
    ),
    # Memories (the user's, not a session's).
    "/memories/": Rule(
        LOGIN, ("GET", "POST"), data={"key": "bobs", "category": "Project", "l0_abstract": "x"}
    ),
    "/memories/<int:pk>/edit/": Rule(
        OWNER,
        ("GET", "POST"),
        {"pk": "memory"},
        {"key": "pwned", "category": "Project", "l0_abstract": "pwned", "confidence": "1"},
    ),
    "/memories/<int:pk>/delete/": Rule(OWNER, ("POST",), {"pk": "memory"}),
    # Share links: a branch's Share dialog, Delete on the profile, and the public page (anyone
    # with a link's address; an address that is no link is a 404 to everyone).
    "/shares/branches/<int:branch_id>/": Rule(OWNER, ("GET", "POST"), {"branch_id": "branch"}),
    "/shares/<int:share_id>/delete/": Rule(OWNER, ("POST",), {"share_id": "share"}),
    "/s/<str:token>/": Rule(PUBLIC, ("GET",), url="/s/" + "A" * 43 + "/", answers=(404,)),
    # Health, for load balancers: no user data. 503 where Celery is configured (the PostgreSQL
    # and Redis phase) and no worker runs beside the tests.
    "/healthz": Rule(PUBLIC, ("GET",), answers=(200, 503)),
    # The app's icon (a redirect to its static file): nothing of anyone's.
    "/favicon.ico": Rule(PUBLIC, ALL),
}

API_RULES: dict[str, Rule] = {
    "/api/v1/": Rule(PUBLIC, ALL, answers=(404,)),  # any other address: a JSON 404
    "/api/v1/schema/": Rule(PUBLIC, ("GET",)),
    "/api/v1/docs/": Rule(PUBLIC, ("GET",)),
    "/api/v1/sessions/": Rule(LOGIN, ("GET", "POST"), data={"name": "bob's"}),
    "/api/v1/sessions/import/": Rule(LOGIN, ("POST",), data={"format": "nope"}),
    "/api/v1/imports/<int:pk>/": Rule(OWNER, ("GET",), {"pk": "import_job"}),
    "/api/v1/keys/": Rule(LOGIN, ("GET", "POST"), data={"name": "bob's key"}),
    # Alice's session has this very key: bob's post makes and talks to a session of his own.
    "/api/v1/chat/": Rule(LOGIN, ("POST",), data={"session_key": ALICES_KEY, "message": "pwned"}),
    "/api/v1/memories/": Rule(
        LOGIN, ("GET", "POST"), data={"key": "bobs", "category": "Project", "l0_abstract": "x"}
    ),
    "/api/v1/memories/<int:pk>/": Rule(
        OWNER, ("GET", "PATCH", "DELETE"), {"pk": "memory"}, {"l0_abstract": "pwned"}
    ),
    "/api/v1/keys/<int:pk>/": Rule(OWNER, ("DELETE",), {"pk": "key"}),
    "/api/v1/mcp/servers/": Rule(LOGIN, ("GET",)),
    "/api/v1/mcp/servers/<str:name>/credentials/": Rule(
        OWNER,
        ("PUT", "DELETE"),
        {"name": "mcp_private_name"},
        {"headers": {"Authorization": "Bearer pwned"}},
    ),
    "/api/v1/sessions/<int:pk>/": Rule(
        OWNER,
        ("GET", "PATCH", "DELETE"),
        {"pk": "session"},
        {"name": "pwned", "archived": True, "pinned": True, "metadata": {"pwned": 1}},
    ),
    "/api/v1/sessions/<int:pk>/messages/": Rule(OWNER, ("GET",), {"pk": "session"}),
    "/api/v1/messages/<int:pk>/feedback/": Rule(
        OWNER, ("POST",), {"pk": "assistant_message"}, {"rating": "up", "note": "pwned"}
    ),
    "/api/v1/sessions/<int:pk>/turns/": Rule(
        OWNER, ("POST",), {"pk": "session"}, {"message": "pwned"}
    ),
    "/api/v1/sessions/<int:pk>/branches/": Rule(OWNER, ("GET",), {"pk": "session"}),
    "/api/v1/sessions/<int:pk>/effects/": Rule(OWNER, ("GET",), {"pk": "session"}),
    "/api/v1/sessions/<int:pk>/checkpoints/": Rule(
        OWNER, ("GET", "POST"), {"pk": "session"}, {"name": "pwned", "description": "pwned"}
    ),
    "/api/v1/sessions/<int:pk>/export/": Rule(OWNER, ("GET",), {"pk": "session"}),
    # Without refs alice is answered 400 (served); bob's 404 comes before any ref is read.
    "/api/v1/sessions/<int:pk>/diff/": Rule(OWNER, ("GET",), {"pk": "session"}),
    "/api/v1/sessions/<int:pk>/files/": Rule(OWNER, ("GET",), {"pk": "session"}),
    "/api/v1/sessions/<int:pk>/files/<path:path>": Rule(
        OWNER, ("GET", "PUT", "DELETE"), {"pk": "session", "path": "file"}, {"pwned": True}
    ),
    "/api/v1/turns/<int:pk>/approve/": Rule(
        OWNER, ("POST",), {"pk": "turn"}, {"tool_call_id": "call_1", "approved": True}
    ),
    "/api/v1/turns/<int:pk>/": Rule(OWNER, ("GET",), {"pk": "turn"}),
    "/api/v1/turns/<int:pk>/cancel/": Rule(OWNER, ("POST",), {"pk": "turn"}),
    "/api/v1/branches/<int:pk>/": Rule(OWNER, ("PATCH",), {"pk": "branch"}, {"name": "pwned"}),
    "/api/v1/branches/<int:pk>/activate/": Rule(OWNER, ("POST",), {"pk": "branch"}),
    "/api/v1/branches/<int:pk>/context/": Rule(OWNER, ("GET",), {"pk": "branch"}),
    "/api/v1/checkpoints/<int:pk>/": Rule(OWNER, ("GET", "DELETE"), {"pk": "checkpoint"}),
    "/api/v1/checkpoints/<int:pk>/restore/": Rule(
        OWNER, ("POST",), {"pk": "checkpoint"}, {"mode": "rewind"}
    ),
    "/api/v1/branches/<int:pk>/share/": Rule(OWNER, ("POST",), {"pk": "branch"}),
    "/api/v1/shares/": Rule(LOGIN, ("GET",)),
    "/api/v1/shares/<int:pk>/": Rule(OWNER, ("DELETE",), {"pk": "share"}),
    "/api/v1/telegram/link/": Rule(LOGIN, ("POST",)),
    "/api/v1/usage/": Rule(LOGIN, ("GET",)),
}

# What a destructive admin POST would carry: confirm a deletion, run the bulk delete on the
# object, rename it, make someone a superuser, set a password, close the sign-up.
ADMIN_POST = {
    "post": "yes",
    "action": "delete_selected",
    "_selected_action": "{object}",
    "index": "0",
    "session_name": "pwned",
    "checkpoint_name": "pwned",
    "l0_abstract": "pwned",
    "key": "pwned",
    "category": "Project",
    "confidence": "1",
    "description": "pwned",
    "name": "pwned",
    "username": "pwned",
    "is_staff": "on",
    "is_superuser": "on",
    "is_active": "on",
    "password1": "Pwned-password-123",
    "password2": "Pwned-password-123",
    "usable_password": "true",
    "signup_open": "",
    "metadata": "{}",
    "session_state": "{}",
}

ADMIN_SITE_RULES: dict[str, Rule] = {
    "/admin/login/": Rule(PUBLIC, ("GET", "POST", "PUT"), data={"username": "alice"}),
    "/admin/": Rule(STAFF, ("GET",)),
    "/admin/logout/": Rule(STAFF, ("POST",), answers=(200,)),
    "/admin/password_change/": Rule(STAFF, ("GET",)),
    "/admin/password_change/done/": Rule(STAFF, ("GET",)),
    "/admin/autocomplete/": Rule(STAFF, ("GET",), answers=(403,)),  # no field named: refused
    "/admin/jsi18n/": Rule(STAFF, ("GET",)),
    "/admin/r/<path:content_type_id>/<path:object_id>/": Rule(
        STAFF,
        ("GET",),
        {"content_type_id": "session_type", "object_id": "session"},
        answers=(404,),  # "view on site": no model here has a public address
    ),
    "/admin/^(?P<app_label>django_celery_beat|access|auth|accounts|sessions_app|checkpoints"
    "|governance|integrations|agents|memories|ops|usage)/$": Rule(
        STAFF, ("GET",), url="/admin/sessions_app/"
    ),
    "/admin/(?P<url>.*)$": Rule(STAFF, ("GET",), url="/admin/no-such-page/", answers=(404,)),
    # UserAdmin's own extra page.
    "/admin/accounts/user/<id>/password/": Rule(MODEL, ("GET",), {"id": "alice"}),
    # Run a retention rule now (the audit records' list): staff with ops.add_auditrecord.
    "/admin/ops/auditrecord/run/": Rule(MODEL, ("POST",), answers=(302,)),
    # The operator's dashboard (web.admin_site): everyone's figures, each section behind the view
    # permissions of what it shows; staff who may see no section are refused.
    "/admin/dashboard/": Rule(MODEL, ("GET",)),
    # Everyone's usage of the models by user, group and model (web.admin.usage_report): staff
    # with usage.view_usagerecord only.
    "/admin/dashboard/usage/": Rule(MODEL, ("GET",)),
    # A session as its branch tree, and a restore on the owner's behalf (web.admin.governance):
    # staff with governance.govern_conversations only.
    "/admin/conversations/<int:pk>/tree/": Rule(MODEL, ("GET", "POST"), {"pk": "session"}),
}

# Which of alice's objects fills the object id of each model's admin pages.
ADMIN_OBJECTS = {
    "auth.Group": "group",
    "access.AccessRule": "access_rule",
    "usage.ModelPrice": "model_price",
    "usage.Budget": "budget",
    "usage.UsageRecord": "usage_record",
    "accounts.User": "alice",
    "accounts.SiteSettings": "site_settings",
    "accounts.ApiKey": "key",
    "agents.McpServer": "mcp_server",
    "checkpoints.Checkpoint": "checkpoint",
    "memories.Memory": "memory",
    "sessions_app.Session": "session",
    "sessions_app.Branch": "branch",
    "sessions_app.Message": "user_message",
    "sessions_app.RatedMessage": "assistant_message",  # rated in her world
    "sessions_app.Turn": "turn",
    "sessions_app.Summary": "summary",
    "sessions_app.LedgerEntry": "ledger_entry",
    "ops.AuditRecord": "audit_record",
    "integrations.TelegramChat": "telegram_chat",
    "governance.AuditRecord": "governance_record",
    "django_celery_beat.PeriodicTask": "periodic_task",
    "django_celery_beat.IntervalSchedule": "interval",
    "django_celery_beat.CrontabSchedule": "crontab",
    "django_celery_beat.SolarSchedule": "solar",
    "django_celery_beat.ClockedSchedule": "clocked",
}
# Admin pages that are closed even to the superuser, by design: rows the services make (add),
# rows that only go with their session (delete), the one settings row.
ADMIN_CLOSED = {
    "/admin/sessions_app/session/add/",
    "/admin/accounts/sitesettings/add/",
    "/admin/accounts/sitesettings/<path:object_id>/delete/",
    "/admin/accounts/apikey/add/",
    # A chat is linked by its user's /start CODE only.
    "/admin/integrations/telegramchat/add/",
    "/admin/checkpoints/checkpoint/add/",
    "/admin/memories/memory/add/",
    "/admin/sessions_app/branch/add/",
    "/admin/sessions_app/branch/<path:object_id>/delete/",
    "/admin/sessions_app/message/add/",
    "/admin/sessions_app/message/<path:object_id>/delete/",
    "/admin/sessions_app/ratedmessage/add/",
    "/admin/sessions_app/ratedmessage/<path:object_id>/delete/",
    "/admin/sessions_app/turn/add/",
    "/admin/sessions_app/turn/<path:object_id>/delete/",
    "/admin/sessions_app/summary/add/",
    "/admin/sessions_app/summary/<path:object_id>/delete/",
    # The effects ledger is written by the turns only, and goes with its session only.
    "/admin/sessions_app/ledgerentry/add/",
    "/admin/sessions_app/ledgerentry/<path:object_id>/delete/",
    # The audit trail is written by the jobs only.
    "/admin/ops/auditrecord/add/",
    "/admin/ops/auditrecord/<path:object_id>/delete/",
    # So is the governance record: by the restores made on a user's behalf only.
    "/admin/governance/auditrecord/add/",
    "/admin/governance/auditrecord/<path:object_id>/delete/",
    # The record of the models' usage is written by the calls only, and goes with its user only.
    "/admin/usage/usagerecord/add/",
    "/admin/usage/usagerecord/<path:object_id>/delete/",
}


def admin_model_rules() -> dict[str, Rule]:
    """The six standard pages of every registered ModelAdmin. A ModelAdmin's extra pages (its
    own get_urls) are not made here: they need a rule of their own above."""
    rules = {}
    for model in admin.site._registry:
        opts = model._meta
        base = f"/admin/{opts.app_label}/{opts.model_name}/"
        obj = {"object_id": ADMIN_OBJECTS.get(opts.label, f"<add {opts.label} to ADMIN_OBJECTS>")}
        pages = {
            "": Rule(MODEL, ("GET",)),
            "add/": Rule(MODEL, ("GET",)),
            "<path:object_id>/history/": Rule(MODEL, ("GET",), obj),
            "<path:object_id>/delete/": Rule(MODEL, ("GET",), obj),
            "<path:object_id>/change/": Rule(MODEL, ("GET",), obj),
            # Only a redirect to the change page; the change page checks the permission.
            "<path:object_id>/": Rule(STAFF, ("GET",), obj, answers=(302,), to="/change/"),
        }
        for tail, rule in pages.items():
            if base + tail in ADMIN_CLOSED:
                rule = Rule(rule.access, rule.methods, rule.params, answers=(403,))
            rules[base + tail] = rule
    return rules


def rules() -> dict[str, Rule]:
    return {**PAGE_RULES, **API_RULES, **ADMIN_SITE_RULES, **admin_model_rules()}


WS_RULES: dict[str, Rule] = {
    "/ws/chat/<int:pk>/": Rule(OWNER, ("GET",), {"pk": "session"}),
    "/ws/v1/sessions/<int:pk>/": Rule(OWNER, ("GET",), {"pk": "session"}),
}


# --- The routes, as the project declares them ---------------------------------------------------


def _walk(patterns: list, prefix: str) -> list[str]:
    found = []
    for pattern in patterns:
        if isinstance(pattern, URLResolver):
            found += _walk(pattern.url_patterns, prefix + str(pattern.pattern))
        else:
            assert isinstance(pattern, URLPattern)
            found.append(prefix + str(pattern.pattern))
    return found


def http_routes() -> list[str]:
    return _walk(get_resolver().url_patterns, "/")


def ws_routes() -> list[str]:
    return _walk(websocket_urlpatterns, "/")


def test_every_route_has_a_rule():
    discovered, table = http_routes(), rules()
    missing = [route for route in discovered if route not in table]
    assert not missing, "\n".join(f"add a rule for {route}" for route in missing)
    stale = [route for route in table if route not in discovered]
    assert not stale, "\n".join(f"no such route any more: {route}" for route in stale)
    unknown = [label for label in ADMIN_OBJECTS if label not in _admin_labels()]
    assert not unknown, unknown
    missing_objects = [label for label in _admin_labels() if label not in ADMIN_OBJECTS]
    assert not missing_objects, "\n".join(
        f"add an object of {label} to ADMIN_OBJECTS" for label in missing_objects
    )


def test_every_socket_route_has_a_rule():
    discovered = ws_routes()
    missing = [route for route in discovered if route not in WS_RULES]
    assert not missing, "\n".join(f"add a rule for {route}" for route in missing)
    assert sorted(WS_RULES) == sorted(discovered)


def test_the_matrix_covers_pages_api_sockets_and_admin():
    """The walk really finds the project's routes (a walk that found nothing would prove
    nothing)."""
    routes = http_routes()
    assert sum(r.startswith("/chat/") for r in routes) >= 20
    assert sum(r.startswith("/api/v1/") for r in routes) >= 17
    assert sum(r.startswith("/admin/") for r in routes) >= 6 * len(admin.site._registry) + 10
    assert len(ws_routes()) == 2


def _admin_labels() -> list[str]:
    return [model._meta.label for model in admin.site._registry]


# --- Alice's world ------------------------------------------------------------------------------


@pytest.fixture
def world(alice, bob, django_user_model) -> dict[str, Any]:
    """Alice's objects, one of each kind, every text carrying SECRET; bob's own session; a
    staff member without permissions."""
    session = session_create(owner=alice, name=f"{SECRET} session", session_key=ALICES_KEY)
    first = Branch.objects.get(session=session, is_current=True)
    question = message_append(branch=first, role="user", content=f"{SECRET} question")
    answer = message_append(branch=first, role="assistant", content=f"{SECRET} answer")
    # Rated, with a note (sessions_app.feedback): the admin's rated replies list it.
    message_feedback_set(message=answer, rating="down", note=f"{SECRET} note")
    checkpoint = checkpoint_create(branch=first, name=f"{SECRET} cp", description=SECRET)
    turn = turn_start(session=session, message=f"{SECRET} again")
    turn_fail(turn=turn, error=f"{SECRET} failure")
    # An entry of her effects ledger (a turn's external call; made here as its row, as the
    # turns that make them need a model).
    ledger_entry = LedgerEntry.objects.create(
        session=session,
        user=alice,
        branch_ref=first.pk,
        turn_ref=turn.pk,
        position=2,
        tool_name="send_message",
        tool_args={"text": SECRET},
        tool_result=f"{SECRET} sent",
        status=LedgerEntry.Status.RAN,
    )
    summary = summary_store(branch=first, end=2, content=f"{SECRET} summary", model="m")
    # The current branch inherits both messages; `first` is no longer current (one to switch to).
    branch_fork(branch=first, position=2, forked_from_id=checkpoint.pk)
    key, _ = apikey_create(user=alice, name=f"{SECRET} key")
    memory = memory_create(
        user=alice,
        key="alice-memory",
        category="Security",
        l0_abstract=f"{SECRET} line",
        l1_overview=f"{SECRET} overview",
        l2_details=f"{SECRET} details",
    )
    file_write(branch=current_branch(session), path="notes/alice.md", content=f"{SECRET} file")
    file_write(branch=current_branch(session), path="notes/alice.png", content=PNG_BYTES)
    # A tool result with an image an MCP tool returned (agents.mcp.results).
    pictured = message_append(
        branch=current_branch(session),
        role="tool",
        tool_name="camera__snapshot",
        tool_result=f"{SECRET} [image img-1: image/png]",
        metadata={"images": [{"id": "img-1", "mime": "image/png", "data": PNG}]},
    )
    share, _ = share_create(owner=alice, branch=first)
    # A model call of hers (a model's name is what a usage page shows of it).
    usage = usage_record(
        user_id=alice.pk,
        model=f"{SECRET} model",
        input_tokens=5,
        output_tokens=1,
        session_id=session.pk,
        branch_id=first.pk,
    )
    assert usage is not None
    session_create(owner=bob, name="bob's own")
    group = Group.objects.create(name=f"{SECRET} group")
    alice.groups.add(group)
    interval = IntervalSchedule.objects.create(every=5, period="seconds")
    clerk = django_user_model.objects.create_user("clerk", password="clerk-password-1")  # noqa: S106 - a test user's password
    clerk.is_staff = True
    clerk.save()
    return {
        "alice": alice.pk,
        "session": session.pk,
        "branch": first.pk,
        "user_message": question.pk,
        "assistant_message": answer.pk,
        "tool_message": pictured.pk,
        "image_index": 0,
        "checkpoint": checkpoint.pk,
        "turn": turn.pk,
        "summary": summary.pk,
        "ledger_entry": ledger_entry.pk,
        "key": key.pk,
        "memory": memory.pk,
        "file": "notes/alice.md",
        "image_file": "notes/alice.png",
        "share": share.pk,
        "usage_record": usage.pk,
        "import_job": ImportJob.objects.create(
            owner=alice,
            source="chatgpt",
            filename=f"{SECRET}.json",
            total=2,
            done=2,
            status=ImportJob.Status.DONE,
            sessions=[session.pk],
            failures=[{"index": 1, "title": SECRET, "error": SECRET}],
        ).pk,
        "telegram_chat": TelegramChat.objects.create(
            chat_id=12345, user=alice, title=f"{SECRET} chat"
        ).pk,
        # The operator's, not alice's: its secret header must never show either.
        "mcp_server": McpServer.objects.create(
            name="tracker", url="http://127.0.0.1:9/mcp", headers={"X-Key": SECRET}
        ).pk,
        # A server for alice alone, with her own credentials for it.
        "mcp_private_name": _alices_mcp_server(alice).name,
        "group": group.pk,
        # Her group's access rule, a price, and a budget of hers (the operator's settings).
        "access_rule": AccessRule.objects.create(group=group, model_ids=f"{SECRET}-model").pk,
        "model_price": ModelPrice.objects.create(
            model=f"{SECRET}-model", input_per_million=1, output_per_million=2
        ).pk,
        "budget": Budget.objects.create(user=alice, limit=1).pk,
        "site_settings": SiteSettings.load().pk,
        "session_type": ContentType.objects.get_for_model(Session).pk,
        "audit_record": AuditRecord.objects.create(
            rule=AuditRecord.Rule.ERASE_USER, trigger="admin", actor=alice, error=SECRET
        ).pk,
        # An administrator's restore of alice's session, with its notice on her page.
        "governance_record": GovernanceRecord.objects.create(
            actor_name="an admin",
            user=alice,
            session=session,
            session_ref=session.pk,
            checkpoint=checkpoint,
            checkpoint_ref=checkpoint.pk,
            checkpoint_name=checkpoint.checkpoint_name,
            action=GovernanceRecord.Action.RESTORE_AS_BRANCH,
            reason=f"{SECRET} reason",
            branch_ref=first.pk,
        ).pk,
        "periodic_task": PeriodicTask.objects.create(
            name=f"{SECRET} task", task="ops.archive_idle_sessions", interval=interval
        ).pk,
        "interval": interval.pk,
        "crontab": CrontabSchedule.objects.create(minute="7").pk,
        "solar": SolarSchedule.objects.create(event="sunset", latitude=1, longitude=2).pk,
        "clocked": ClockedSchedule.objects.create(clocked_time=timezone.now()).pk,
        "clerk": clerk,
    }


def _alices_mcp_server(alice: User) -> McpServer:
    server = McpServer.objects.create(
        name="private",
        url="http://127.0.0.1:9/mcp",
        for_everyone=False,
        user_headers=["Authorization"],
    )
    server.users.add(alice)
    McpCredential.objects.create(
        user=alice, server=server, headers={"Authorization": f"Bearer {SECRET}"}
    )
    return server


class State:
    """Every row of alice's, the privileges of every user, the groups and the site settings: the
    same queries read again after each request. Each is compiled once (Django's compiler costs
    more than the query) and read through a cursor, every column of every row."""

    def __init__(self, alice_pk: int) -> None:
        sessions = Session.objects.filter(owner_id=alice_pk).values("pk")
        memberships, grants = User.groups.through, User.user_permissions.through
        querysets = {
            "users": User.objects.values(
                "pk", "username", "password", "is_active", "is_staff", "is_superuser"
            ),
            "user groups": memberships.objects.values(),
            "user permissions": grants.objects.values(),
            "groups": Group.objects.values(),
            "access rules": AccessRule.objects.values(),
            "model prices": ModelPrice.objects.values(),
            "budgets": Budget.objects.values(),
            "usage records": UsageRecord.objects.filter(user_id=alice_pk).values(),
            "site settings": SiteSettings.objects.values(),
            "keys": ApiKey.objects.filter(user_id=alice_pk).values(),
            "sessions": Session.objects.filter(owner_id=alice_pk).values(),
            "branches": Branch.objects.filter(session__in=sessions).values(),
            "messages": Message.objects.filter(branch__session__in=sessions).values(),
            "turns": Turn.objects.filter(session__in=sessions).values(),
            "effects": LedgerEntry.objects.filter(session__in=sessions).values(),
            "checkpoints": Checkpoint.objects.filter(branch__session__in=sessions).values(),
            "memories": Memory.objects.filter(user_id=alice_pk).values(),
            "files": FileVersion.objects.filter(branch__session__in=sessions).values(),
            "share links": ShareLink.objects.filter(owner_id=alice_pk).values(),
            "mcp servers": McpServer.objects.values(),
            "mcp credentials": McpCredential.objects.filter(user_id=alice_pk).values(),
            "governance records": GovernanceRecord.objects.filter(user_id=alice_pk).values(),
            "telegram chats": TelegramChat.objects.filter(user_id=alice_pk).values(),
            "telegram link codes": TelegramLinkCode.objects.filter(user_id=alice_pk).values(),
        }
        self.queries = {
            name: queryset.order_by("pk").query.sql_with_params()
            for name, queryset in querysets.items()
        }

    def read(self) -> dict[str, list[tuple]]:
        with connection.cursor() as cursor:
            rows = {}
            for name, (sql, params) in self.queries.items():
                cursor.execute(sql, params)
                rows[name] = cursor.fetchall()
            return rows


def _admin_object(route: str, world: dict[str, Any]) -> int:
    """The id of alice's object of the model whose admin page `route` is (or her session)."""
    for model in admin.site._registry:
        opts = model._meta
        if route.startswith(f"/admin/{opts.app_label}/{opts.model_name}/"):
            return world[ADMIN_OBJECTS[opts.label]]
    return world["session"]


def fill(route: str, rule: Rule, world: dict[str, Any]) -> str:
    if rule.url is not None:
        return rule.url

    def value(match: re.Match[str]) -> str:
        name = match.group(1).split(":")[-1]
        assert name in rule.params, f"{route}: the rule names no object for <{name}>"
        return str(world[rule.params[name]])

    return re.sub(r"<([^>]+)>", value, route)


# --- Requests -----------------------------------------------------------------------------------


def send(client, method: str, url: str, data: dict, *, json_body: bool, **extra: str):
    if method == "GET":
        return client.get(url, **extra)
    if json_body:
        body = json.dumps(data) if method != "DELETE" else ""
        return client.generic(method, url, body, content_type="application/json", **extra)
    if method == "POST":
        return client.post(url, data, **extra)
    return client.generic(
        method, url, urlencode(data, doseq=True), "application/x-www-form-urlencoded", **extra
    )


def _served(response) -> bool:
    """The request reached the view and was answered (a 400 for a body it did not like is an
    answer too): not refused, not sent to log in, not a server error."""
    location = response.get("Location", "")
    to_login = response.status_code == 302 and "/login/" in location
    return (
        response.status_code not in (401, 403, 404, 405)
        and response.status_code < 500
        and (not to_login)
    )


def _kind(route: str) -> str:
    if route.startswith("/api/"):
        return "api"
    if route.startswith("/admin/"):
        return "admin"
    return "page"


@dataclass
class Attempt:
    who: str
    client: Any
    extra: dict[str, str] = field(default_factory=dict)


def outsiders(route: str, rule: Rule, world: dict[str, Any], bob: User) -> list[Attempt]:
    kind = _kind(route)
    attempts = [Attempt("anonymous", browser()), Attempt("bob", browser(bob))]
    if kind == "page":
        attempts.append(Attempt("bob through htmx", browser(bob), {"HTTP_HX_REQUEST": "true"}))
    if kind == "api":
        attempts.append(Attempt("bob's API key", bearer(bob)))
    if kind == "admin" and rule.access == MODEL:
        attempts.append(Attempt("staff without permissions", browser(world["clerk"])))
    return attempts


def expect_refused(route: str, rule: Rule, who: str, method: str, response) -> None:
    """What an outsider must get."""
    kind, status = _kind(route), response.status_code
    where = f"{method} {route} as {who}: {status} {response.get('Location', '')}"
    answered = method in rule.methods
    if rule.access == PUBLIC:
        _expect_public(rule, who, answered, response, where)
    elif kind == "api":
        _expect_api_refused(rule, who, answered, response, where)
    elif kind == "admin":
        _expect_admin_refused(route, who, response, where)
    elif who == "anonymous":
        assert status == 302, where
        # A plain form post without a Referer of ours has no page to return to: the sign-in
        # then leads home (web.middleware.WholePageSignInMiddleware); a page load returns to itself.
        login = "/accounts/login/" if method == "POST" else "/accounts/login/?next="
        assert response["Location"].startswith(login), where
    elif not answered:
        assert status == 405, where
    elif rule.access == LOGIN:
        assert _served(response), where
    else:
        assert status == 404, where


def _expect_public(rule: Rule, who: str, answered: bool, response, where: str) -> None:
    """A public route, to anyone: served, or sent away when signed in (`rule.away`)."""
    status = response.status_code
    if rule.away and who != "anonymous":
        assert status == 302, where
        assert response["Location"] == rule.away, where
    elif not answered:
        assert status == 405, where
    elif rule.answers:
        assert status in rule.answers, where
    else:
        assert _served(response), where


def _expect_api_refused(rule: Rule, who: str, answered: bool, response, where: str) -> None:
    """The API, to an outsider: 401 with a Bearer challenge to the anonymous, 404 to bob."""
    status = response.status_code
    if who == "anonymous":
        assert status == 401, where
        assert response["WWW-Authenticate"].startswith("Bearer"), where
    elif not answered:
        assert status == 405, where
    elif rule.access == LOGIN:
        assert _served(response), where
    else:
        assert status == 404, where
        assert response.json() == {"detail": response.json()["detail"]}, where


def _expect_admin_refused(route: str, who: str, response, where: str) -> None:
    """The admin, to an outsider: 403 to staff without permissions, its login page to others."""
    status = response.status_code
    if who == "staff without permissions":
        assert status == 403, where
        return
    location = "/admin/" if route == "/admin/logout/" else "/admin/login/?next="
    assert status == 302, where
    assert response["Location"].startswith(location), where


def expect_served(route: str, rule: Rule, method: str, response) -> None:
    """What the owner (or the superuser, on the admin) gets."""
    status = response.status_code
    where = f"{method} {route} as the owner: {status} {response.get('Location', '')}"
    if method not in rule.methods:
        assert status == 405, where + " (does the route answer this method now? add it)"
    elif rule.answers:
        assert status in rule.answers, where
        if rule.to:
            assert response["Location"].endswith(rule.to), where
    elif _kind(route) == "admin":
        assert status == 200, where  # a missing object would redirect to the index
    else:
        assert _served(response), where


# --- Every HTTP route ---------------------------------------------------------------------------


@pytest.mark.parametrize("route", http_routes())
def test_a_route_refuses_everyone_its_rule_does_not_let_in(route, world, bob, alice, admin_user):
    table = rules()
    if route not in table:
        pytest.fail(f"add a rule for {route}")
    rule = table[route]
    url = fill(route, rule, world)
    kind = _kind(route)
    data = rule.data
    if kind == "admin" and rule.access != PUBLIC:
        data = {**ADMIN_POST, "_selected_action": str(_admin_object(route, world))}
    state = State(alice.pk)
    before = state.read()
    for attempt in outsiders(route, rule, world, bob):
        for method in ALL:
            response = send(
                attempt.client, method, url, data, json_body=kind == "api", **attempt.extra
            )
            expect_refused(route, rule, attempt.who, method, response)
            assert SECRET.encode() not in response.content, (method, url, attempt.who)
            assert state.read() == before, f"{method} {url} as {attempt.who} changed data"

    if rule.access in (PUBLIC, LOGIN):
        return  # bob was served above, on his own data
    owner = (
        browser(admin_user)
        if kind == "admin"
        else (bearer(alice) if kind == "api" else browser(alice))
    )
    methods = ("GET",) if kind == "admin" else OWNER_ORDER
    for method in methods:
        response = send(owner, method, url, data, json_body=kind == "api")
        expect_served(route, rule, method, response)


MIXED = [
    route
    for route, rule in PAGE_RULES.items()
    if rule.params.get("pk") == "session" and len(rule.params) > 1
]


@pytest.mark.parametrize("route", MIXED)
def test_bobs_own_session_does_not_open_alices_objects(route, world, bob, alice):
    """A route that takes a session and another object: bob names his own session and alice's
    message, turn or branch, and is refused just the same."""
    rule = PAGE_RULES[route]
    bobs = Session.objects.get(owner=bob)
    url = fill(route, rule, {**world, "session": bobs.pk})
    state = State(alice.pk)
    before = state.read()
    for headers in ({}, {"HTTP_HX_REQUEST": "true"}):
        for method in rule.methods:
            response = send(browser(bob), method, url, rule.data, json_body=False, **headers)
            assert response.status_code == 404, (method, url, response.status_code)
            assert SECRET.encode() not in response.content
            assert state.read() == before


@pytest.mark.parametrize("route", ["messages", "checkpoints"])
def test_a_branch_named_in_the_query_is_alices_only_to_alice(route, world, bob, alice):
    """`?branch=` on bob's own session, naming alice's branch: not found, nothing shown."""
    bobs = Session.objects.get(owner=bob)
    url = f"/api/v1/sessions/{bobs.pk}/{route}/?branch={world['branch']}"
    for client in (bearer(bob), browser(bob)):
        response = client.get(url)
        assert response.status_code == 404, (url, response.status_code)
        assert SECRET.encode() not in response.content
    mine = f"/api/v1/sessions/{world['session']}/{route}/?branch={world['branch']}"
    own = bearer(alice).get(mine)
    assert own.status_code == 200
    assert SECRET.encode() in own.content


def test_some_routes_take_a_session_and_another_object():
    assert len(MIXED) == 20, MIXED


# --- Every WebSocket route ----------------------------------------------------------------------


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("route", ws_routes())
def test_a_socket_refuses_everyone_but_the_owner_before_any_event(route, world, alice, bob):
    from channels.testing import WebsocketCommunicator

    from rollback_site.asgi import application

    if route not in WS_RULES:
        pytest.fail(f"add a rule for {route}")
    url = fill(route, WS_RULES[route], world)
    session = world["session"]
    bobs_key = bearer(bob).secret
    revoked = bearer(alice, name="revoked")
    apikey_revoke(user=alice, key_id=ApiKey.objects.get(user=alice, name="revoked").pk)
    site = "http://localhost"
    outsiders = {
        "anonymous": [],
        "anonymous, from the site": [(b"origin", site.encode()), (b"host", b"localhost")],
        "bob's browser": cookie_headers(bob, origin=site),
        "bob's session cookie, no origin": cookie_headers(bob),
        "bob's API key": [(b"authorization", f"Bearer {bobs_key}".encode())],
        "alice's revoked key": [(b"authorization", f"Bearer {revoked.secret}".encode())],
        "a made-up key": [(b"authorization", b"Bearer rbk_" + b"x" * 43)],
        "bob's cookie and a made-up key": [
            *cookie_headers(bob),
            (b"authorization", b"Bearer rbk_" + b"x" * 43),
        ],
    }
    owners = {
        "alice's browser": cookie_headers(alice, origin=site),
        "alice's API key": [(b"authorization", f"Bearer {bearer(alice).secret}".encode())],
    }

    async def publish(delta: str) -> None:
        await database_sync_to_async(events.message_delta)(session=session, turn=1, delta=delta)

    async def run() -> None:
        state = await database_sync_to_async(State)(alice.pk)
        before = await database_sync_to_async(state.read)()
        for who, headers in outsiders.items():
            communicator = WebsocketCommunicator(application, url, headers=headers)
            connected, _code = await communicator.connect(timeout=5)
            if connected:  # the chat page's socket is told why: closed at once, with its code
                output = await communicator.receive_output(timeout=5)
                assert output["type"] == "websocket.close", f"{route} let {who} in: {output}"
                assert output["code"] in (4401, 4404), f"{route} closed {who}'s with {output}"
            await publish(SECRET)
            assert await communicator.receive_nothing(timeout=0.2), f"{who} heard an event"
        assert await database_sync_to_async(state.read)() == before
        for who, headers in owners.items():
            communicator = WebsocketCommunicator(application, url, headers=headers)
            connected, _ = await communicator.connect(timeout=5)
            assert connected, f"{route} refused {who}"
            await publish(SECRET)
            assert SECRET in await communicator.receive_from(timeout=5), who
            await communicator.disconnect(timeout=10)

    async_to_sync(run)()
