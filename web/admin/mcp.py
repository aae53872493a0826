"""Admin console for the operator's MCP servers: name, URL, enabled, the tools that need
approval, the headers, who gets it (everyone, or chosen users and groups; on by default or
chosen per session) and the header names each user supplies for themselves.

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

from agents.mcp.config import HEADER_NAME, check_headers
from agents.mcp.services import mcp_server_save
from agents.models import McpServer
from core.log_secrets import mask_url

TOOL_NAME = re.compile(r"^[A-Za-z0-9_.-]{1,128}$")


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
        assume_scheme="https",
        help_text="The server's streamable HTTP endpoint, e.g. https://mcp.example.com/mcp. "
        "Query values and a password are shown as ***: leave them so to keep the stored ones.",
    )
    approval_names = forms.CharField(
        label="Tools needing approval",
        required=False,
        widget=forms.Textarea(attrs={"rows": 3}),
        help_text="The names of this server's tools (as the server names them), one per line "
        "or separated by commas. Tools the server annotates destructive need approval anyway.",
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
        label="Headers each user supplies",
        required=False,
        widget=forms.Textarea(attrs={"rows": 2}),
        help_text="Header names, one per line or separated by commas, whose values each user "
        "gives for themselves (profile page, or PUT /api/v1/mcp/servers/NAME/credentials/), "
        "e.g. Authorization for a personal bearer token (the user writes 'Bearer ...'). A user "
        "who has not given them is not offered this server. Their values replace the operator's "
        "headers of the same names.",
    )

    class Meta:
        model = McpServer
        fields = ("name", "url", "enabled", "for_everyone", "users", "groups", "per_session")
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
        approval = self.instance.approval if isinstance(self.instance.approval, list) else []
        self.fields["approval_names"].initial = "\n".join(str(a) for a in approval)
        self.fields["user_header_names"].initial = "\n".join(self.instance.asked_headers)
        if self.instance.pk and self.instance.url:
            # A secret in the stored URL is never sent back to the browser.
            self.initial["url"] = mask_url(self.instance.url)

    def clean_url(self) -> str:
        url: str = self.cleaned_data["url"]
        stored = self.instance.url if self.instance.pk else ""
        if stored and url == mask_url(stored):
            return stored  # given back as shown: the stored secrets stay
        if not url.lower().startswith(("http://", "https://")):
            raise forms.ValidationError("An MCP server's URL starts with http:// or https://.")
        return url

    def clean_user_header_names(self) -> list[str]:
        raw = self.cleaned_data.get("user_header_names") or ""
        names = [n.strip() for n in re.split(r"[,\n]", raw) if n.strip()]
        bad = [n for n in names if not HEADER_NAME.match(n)]
        if bad:
            raise forms.ValidationError(f"Not a header name: {bad[0][:60]!r}.")
        return list(dict.fromkeys(names))

    def clean_approval_names(self) -> list[str]:
        raw = self.cleaned_data.get("approval_names") or ""
        names = [n.strip() for n in re.split(r"[,\n]", raw) if n.strip()]
        bad = [n for n in names if not TOOL_NAME.match(n)]
        if bad:
            raise forms.ValidationError(f"Not a tool name: {bad[0][:60]!r}.")
        return list(dict.fromkeys(names))

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


@admin.register(McpServer)
class McpServerAdmin(admin.ModelAdmin):
    form = McpServerForm
    list_display = (
        "name",
        "shown_url",
        "enabled",
        "who",
        "approval_list",
        "headers_set",
        "updated_at",
    )
    list_filter = ("enabled", "for_everyone", "per_session")
    search_fields = ("name",)
    filter_horizontal = ("users", "groups")
    fields = (
        "name",
        "url",
        "enabled",
        "approval_names",
        "stored_headers",
        "new_headers",
        "for_everyone",
        "users",
        "groups",
        "per_session",
        "user_header_names",
        "created_at",
        "updated_at",
    )
    readonly_fields = ("stored_headers", "created_at", "updated_at")

    @admin.display(description="URL")
    def shown_url(self, server: McpServer) -> str:
        return mask_url(server.url)

    @admin.display(description="Who")
    def who(self, server: McpServer) -> str:
        who = "everyone" if server.for_everyone else "chosen users and groups"
        if server.per_session:
            who += ", chosen per session"
        if server.asked_headers:
            who += f", own {', '.join(server.asked_headers)}"
        return who

    @admin.display(description="Tools needing approval")
    def approval_list(self, server: McpServer) -> str:
        approval = server.approval if isinstance(server.approval, list) else []
        return ", ".join(str(a) for a in approval) or "—"

    @admin.display(description="Headers")
    def headers_set(self, server: McpServer) -> str:
        return header_names(server)

    @admin.display(description="Stored headers (names only)")
    def stored_headers(self, server: McpServer) -> str:
        return header_names(server)

    def save_model(self, request: HttpRequest, obj: McpServer, form: Any, change: bool) -> None:
        obj.approval = form.cleaned_data["approval_names"]
        obj.user_headers = form.cleaned_data["user_header_names"]
        mcp_server_save(server=obj, headers=form.cleaned_data["new_headers"])
