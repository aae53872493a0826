"""Admin console for the operator's MCP servers: name, transport (streamable HTTP or SSE at a
URL, or a stdio command with its arguments and environment), timeout, enabled, the tools allowed,
denied and needing approval (checked against the server's tools once it has listed them), the
headers; who gets it (everyone, or chosen users and groups; on by default or chosen per session)
and the header names each user supplies for themselves; its status (last contact, last error,
the breaker) and its tools with their annotations; and "Test connection", which queues a listing
on a worker (agents.check_mcp_server: a web request never starts a stdio server) whose result the
status shows on the next load.

A URL's query values and password are shown masked (`?key=***`, core.log_secrets.mask_url), in
the list and in the form; the form given back with the masked URL unchanged keeps the stored one.

The headers are secrets (an API key, a bearer token). The change form never shows their values:
its headers field is write-only (left blank, the stored headers stay; a JSON object replaces
them; `{}` removes them), and the form and the list show only the header names. They never
reach a page, a log line or the model (agents.mcp sends them to the server only).
"""

from __future__ import annotations

import json
import re
from typing import Any

from django import forms
from django.contrib import admin
from django.core.exceptions import ImproperlyConfigured
from django.http import HttpRequest
from django.utils.html import format_html_join

from agents.dispatch import enqueue
from agents.mcp.catalogue import is_down
from agents.mcp.config import HEADER_NAME, MAX_TIMEOUT, check_headers
from agents.mcp.services import approval_check, mcp_server_save
from agents.models import McpServer
from core.log_secrets import mask_url

TOOL_NAME = re.compile(r"^[A-Za-z0-9_.-]{1,128}$")


def tool_names_of(raw: str) -> list[str]:
    """Tool names, one per line or separated by commas (forms.ValidationError for a bad one)."""
    names = [n.strip() for n in re.split(r"[,\n]", raw) if n.strip()]
    bad = [n for n in names if not TOOL_NAME.match(n)]
    if bad:
        raise forms.ValidationError(f"Not a tool name: {bad[0][:60]!r}.")
    return list(dict.fromkeys(names))


def header_names(server: McpServer) -> str:
    """The names of the stored headers, each said to be set: never a value."""
    headers = server.headers if isinstance(server.headers, dict) else {}
    return ", ".join(f"{k}: set" for k in sorted(str(k) for k in headers)) or "none"


class WriteOnlyTextarea(forms.Textarea):
    """A textarea that never renders a value: not the stored secret, nor the one just typed
    when the form comes back with an error."""

    def format_value(self, value: Any) -> str | None:
        return None


class McpServerForm(forms.ModelForm):
    url = forms.URLField(
        label="URL",
        max_length=2000,
        required=False,
        assume_scheme="https",
        help_text="http and sse: the server's endpoint, e.g. https://mcp.example.com/mcp "
        "(streamable HTTP) or https://mcp.example.com/sse (SSE). Query values and a password "
        "are shown as ***: leave them so to keep the stored ones.",
    )
    args_lines = forms.CharField(
        label="Arguments",
        required=False,
        widget=forms.Textarea(attrs={"rows": 3}),
        help_text="stdio: the command's arguments, one per line.",
    )
    new_env = forms.CharField(
        label="Environment",
        required=False,
        strip=True,
        widget=WriteOnlyTextarea(attrs={"rows": 2, "autocomplete": "off"}),
        help_text='stdio: a JSON object of variables, e.g. {"API_KEY": "..."}. Leave blank to '
        "keep the stored ones; {} removes them. The values are never shown again.",
    )
    allow_names = forms.CharField(
        label="Only these tools",
        required=False,
        widget=forms.Textarea(attrs={"rows": 2}),
        help_text="Tool names; when set, the server's other tools are not offered.",
    )
    deny_names = forms.CharField(
        label="Never these tools",
        required=False,
        widget=forms.Textarea(attrs={"rows": 2}),
        help_text="Tool names never offered.",
    )
    approval_names = forms.CharField(
        label="Tools needing approval",
        required=False,
        widget=forms.Textarea(attrs={"rows": 3}),
        help_text="The names of this server's tools (`tool` or `server__tool`), one per line "
        "or separated by commas; checked against its tools once it has listed them. Tools the "
        "server annotates destructive need approval anyway.",
    )
    new_headers = forms.CharField(
        label="Headers",
        required=False,
        strip=True,
        # A secret is never sent back to the browser: the field starts empty every time.
        widget=WriteOnlyTextarea(attrs={"rows": 3, "autocomplete": "off"}),
        help_text='A JSON object, e.g. {"Authorization": "Bearer ..."}. Leave blank to keep the '
        "stored headers; {} removes them. The values are never shown again.",
    )

    user_header_names = forms.CharField(
        label="Values each user supplies",
        required=False,
        widget=forms.Textarea(attrs={"rows": 2}),
        help_text="Names, one per line or separated by commas, whose values each user gives "
        "for themselves (profile page, or PUT /api/v1/mcp/servers/NAME/credentials/): header "
        "names for http and sse (e.g. Authorization for a personal bearer token: the user "
        "writes 'Bearer ...'), environment variables for stdio (e.g. GITHUB_TOKEN). A user who "
        "has not given them is not offered this server. Their values replace the operator's "
        "of the same names.",
    )

    class Meta:
        model = McpServer
        fields = (
            "name",
            "transport",
            "url",
            "command",
            "timeout",
            "enabled",
            "for_everyone",
            "users",
            "groups",
            "per_session",
        )
        labels = {  # noqa: RUF012
            "for_everyone": "For everyone",
            "per_session": "Chosen per session",
        }
        help_texts = {  # noqa: RUF012
            "for_everyone": "Off: only the users and the members of the groups chosen below.",
            "per_session": "Off in every session until its user turns it on in the chat's Tools "
            "menu (else on until turned off there).",
        }

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        for field, attr in (
            ("approval_names", "approval"),
            ("allow_names", "allow"),
            ("deny_names", "deny"),
            ("args_lines", "args"),
        ):
            value = getattr(self.instance, attr)
            self.fields[field].initial = "\n".join(
                str(a) for a in (value if isinstance(value, list) else [])
            )
        self.fields["user_header_names"].initial = "\n".join(self.instance.asked_headers)
        if self.instance.pk and self.instance.url:
            # A secret in the stored URL is never sent back to the browser.
            self.initial["url"] = mask_url(self.instance.url)

    def clean_url(self) -> str:
        url: str = self.cleaned_data.get("url") or ""
        stored = self.instance.url if self.instance.pk else ""
        if stored and url == mask_url(stored):
            return stored  # given back as shown: the stored secrets stay
        if url and not url.lower().startswith(("http://", "https://")):
            raise forms.ValidationError("An MCP server's URL starts with http:// or https://.")
        return url

    def clean_timeout(self) -> float | None:
        value: float | None = self.cleaned_data.get("timeout")
        if value is not None and not 0 < value <= MAX_TIMEOUT:
            raise forms.ValidationError("Seconds in (0, 600]; blank for AGENT_MCP_TIMEOUT.")
        return value

    def clean_args_lines(self) -> list[str]:
        raw = self.cleaned_data.get("args_lines") or ""
        return [line.strip() for line in raw.splitlines() if line.strip()]

    def clean_user_header_names(self) -> list[str]:
        raw = self.cleaned_data.get("user_header_names") or ""
        names = [n.strip() for n in re.split(r"[,\n]", raw) if n.strip()]
        bad = [n for n in names if not HEADER_NAME.match(n)]
        if bad:
            raise forms.ValidationError(f"Not a header name: {bad[0][:60]!r}.")
        return list(dict.fromkeys(names))

    def clean_approval_names(self) -> list[str]:
        names = tool_names_of(self.cleaned_data.get("approval_names") or "")
        try:
            return approval_check(self.instance, names, where="Approval")
        except ImproperlyConfigured as exc:
            raise forms.ValidationError(str(exc)) from None

    def clean_allow_names(self) -> list[str]:
        return tool_names_of(self.cleaned_data.get("allow_names") or "")

    def clean_deny_names(self) -> list[str]:
        return tool_names_of(self.cleaned_data.get("deny_names") or "")

    def clean_new_env(self) -> dict[str, str] | None:
        raw = self.cleaned_data.get("new_env") or ""
        if not raw:
            return None
        try:
            value = json.loads(raw)
        except ValueError:
            raise forms.ValidationError(
                'Not valid JSON: write an object such as {"A": "b"}.'
            ) from None
        if not isinstance(value, dict) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in value.items()
        ):
            raise forms.ValidationError("An object of names to strings.")
        return value

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        transport = data.get("transport")
        if transport in ("http", "sse") and not data.get("url"):
            self.add_error("url", "An http or sse server needs its URL.")
        if transport == "stdio" and not (data.get("command") or "").strip():
            self.add_error("command", "A stdio server needs its command (a program).")
        return data

    def clean_new_headers(self) -> dict[str, str] | None:
        raw = self.cleaned_data.get("new_headers") or ""
        if not raw:
            return None
        try:
            value = json.loads(raw)
        except ValueError:
            # Never quote the input back: it holds a secret.
            raise forms.ValidationError(
                'Not valid JSON: write an object such as {"Authorization": "Bearer ..."}.'
            ) from None
        try:
            return check_headers(value, "Headers")
        except ImproperlyConfigured as exc:
            raise forms.ValidationError(str(exc)) from None


def _hints(tool: dict[str, Any]) -> str:
    hints = tool.get("annotations") if isinstance(tool.get("annotations"), dict) else {}
    said = [k.removesuffix("Hint") for k, v in (hints or {}).items() if v is True]
    return ", ".join(said) or "no annotations"


@admin.register(McpServer)
class McpServerAdmin(admin.ModelAdmin):
    form = McpServerForm
    list_display = (
        "name",
        "transport",
        "where",
        "enabled",
        "who",
        "status",
        "headers_set",
        "updated_at",
    )
    list_filter = ("enabled", "transport", "for_everyone", "per_session")
    search_fields = ("name",)
    filter_horizontal = ("users", "groups")
    actions = ("test_connection",)
    # Each transport's own fields in a fieldset of their own; static/rollback/admin-mcp.js
    # shows only the chosen transport's (without scripts, both show, each titled).
    fieldsets = (
        (None, {"fields": ("name", "transport", "enabled", "timeout")}),
        (
            "Streamable HTTP and SSE",
            {
                "fields": ("url", "stored_headers", "new_headers"),
                "classes": ("mcp-transport", "mcp-http"),
                "description": "For the transports http and sse: the server's address and the "
                "headers sent to it.",
            },
        ),
        (
            "stdio",
            {
                "fields": ("command", "args_lines", "stored_env", "new_env"),
                "classes": ("mcp-transport", "mcp-stdio"),
                "description": "For the transport stdio: the command a worker starts, with its "
                "arguments and environment (a web process never starts it).",
            },
        ),
        ("Tools", {"fields": ("allow_names", "deny_names", "approval_names")}),
        (
            "Who gets it",
            {"fields": ("for_everyone", "users", "groups", "per_session", "user_header_names")},
        ),
        ("State", {"fields": ("status", "tools", "created_at", "updated_at")}),
    )

    class Media:
        js = ("rollback/admin-mcp.js",)

    readonly_fields = (
        "stored_headers",
        "stored_env",
        "status",
        "tools",
        "created_at",
        "updated_at",
    )

    @admin.display(description="Who")
    def who(self, server: McpServer) -> str:
        who = "everyone" if server.for_everyone else "chosen users and groups"
        if server.per_session:
            who += ", chosen per session"
        if server.asked_headers:
            who += f", own {', '.join(server.asked_headers)}"
        return who

    @admin.display(description="URL or command")
    def where(self, server: McpServer) -> str:
        return server.command if server.transport == "stdio" else mask_url(server.url)

    @admin.display(description="Status")
    def status(self, server: McpServer) -> str:
        contact = (
            f"last contact {server.last_contact:%Y-%m-%d %H:%M:%S}"
            if server.last_contact
            else "never contacted"
        )
        parts = [contact]
        if server.last_error:
            parts.append(f"last error: {server.last_error}")
        if is_down(server):
            parts.append(f"skipped until {server.down_until:%H:%M:%S} (failed {server.failures}x)")
        return "; ".join(parts)

    @admin.display(description="Tools")
    def tools(self, server: McpServer) -> str:
        if server.catalogue is None:
            return "not listed yet (Test connection lists them)"
        approval = {str(a).removeprefix(f"{server.name}__") for a in server.approval or []}
        rows = [
            (
                f"{server.name}__{t.get('name')}",
                _hints(t),
                " (needs approval)" if t.get("name") in approval else "",
            )
            for t in server.catalogue
            if isinstance(t, dict)
        ]
        return format_html_join("", "<div><code>{}</code>: {}{}</div>", rows) or "none"

    @admin.display(description="Stored environment (names only)")
    def stored_env(self, server: McpServer) -> str:
        env = server.env if isinstance(server.env, dict) else {}
        return ", ".join(sorted(str(k) for k in env)) or "none"

    @admin.action(description="Test connection (list its tools on a worker)")
    def test_connection(self, request: HttpRequest, queryset: Any) -> None:
        for server in queryset:
            enqueue("agents.check_mcp_server", server.pk)
        self.message_user(
            request,
            "Queued: a worker lists the tools of each; their status shows the result on reload.",
        )

    @admin.display(description="Headers")
    def headers_set(self, server: McpServer) -> str:
        return header_names(server)

    @admin.display(description="Stored headers (names only)")
    def stored_headers(self, server: McpServer) -> str:
        return header_names(server)

    def save_model(self, request: HttpRequest, obj: McpServer, form: Any, change: bool) -> None:
        obj.approval = form.cleaned_data["approval_names"]
        obj.user_headers = form.cleaned_data["user_header_names"]
        obj.allow = form.cleaned_data["allow_names"]
        obj.deny = form.cleaned_data["deny_names"]
        obj.args = form.cleaned_data["args_lines"]
        if form.cleaned_data["new_env"] is not None:
            obj.env = form.cleaned_data["new_env"]
        if change:  # an admin change: the next turn lists its tools again
            obj.catalogue = None
            obj.down_until = None
        mcp_server_save(server=obj, headers=form.cleaned_data["new_headers"])
