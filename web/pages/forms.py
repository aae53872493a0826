"""Forms of the account pages: they check the shape of the input; the services decide."""

from __future__ import annotations

from typing import Any

from django import forms

from accounts.models import THEMES
from accounts.services import API_KEY_NAME_MAX_LENGTH
from core.model_choice import INSTRUCTIONS_MAX_CHARS
from web.signin import LimitedAuthenticationForm

THEME_LABELS = {"system": "Same as the system", "light": "Light", "dark": "Dark"}


def _testid(field: forms.Field, testid: str, **attrs: str) -> None:
    field.widget.attrs.update({"data-testid": testid, **attrs})


def add_domain_error(form: forms.Form, exc: Exception) -> None:
    """Show a domain error beside the field it is about, or above the form."""
    field = getattr(exc, "field", None)
    messages = getattr(exc, "messages", None) or [getattr(exc, "message", str(exc))]
    form.add_error(field if field in form.fields else None, messages)


class LoginForm(LimitedAuthenticationForm):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        _testid(self.fields["username"], "username")
        _testid(self.fields["password"], "password")


class SignupForm(forms.Form):
    username = forms.CharField(
        max_length=150,
        help_text="Letters, digits and @ . + - _ only.",
        widget=forms.TextInput(attrs={"autocomplete": "username", "autofocus": True}),
    )
    email = forms.EmailField(
        label="Email (optional)",
        required=False,
        widget=forms.EmailInput(attrs={"autocomplete": "email"}),
    )
    password = forms.CharField(
        strip=False, widget=forms.PasswordInput(attrs={"autocomplete": "new-password"})
    )
    password2 = forms.CharField(
        label="Password again",
        strip=False,
        widget=forms.PasswordInput(attrs={"autocomplete": "new-password"}),
    )

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        for name in ("username", "password", "password2"):
            _testid(self.fields[name], name)

    def clean(self) -> dict[str, Any] | None:
        cleaned = super().clean()
        if cleaned is not None:  # Form.clean returns cleaned_data; only overrides return None.
            password, password2 = cleaned.get("password"), cleaned.get("password2")
            if password and password2 and password != password2:
                self.add_error("password2", "The two passwords differ.")
        return cleaned


class PreferencesForm(forms.Form):
    auto_checkpoint = forms.BooleanField(
        label="Take automatic checkpoints after the agent uses a tool", required=False
    )
    checkpoint_each_message = forms.BooleanField(
        label="Take a checkpoint before each message I send",
        required=False,
        help_text=(
            "Named after the message's first words, so you can go back to just before any of "
            "them. A session's own setting wins; old ones are cleaned like other automatic "
            "checkpoints."
        ),
    )
    theme = forms.ChoiceField(choices=[(theme, THEME_LABELS[theme]) for theme in THEMES])
    # Its limit is the service's (accounts.services.preferences_update); the browser's is a help.
    instructions = forms.CharField(
        label="Custom instructions",
        required=False,
        help_text=(
            "Added to the assistant's instructions in all your sessions, before a session's own. "
            f"At most {INSTRUCTIONS_MAX_CHARS:,} characters."
        ),
        widget=forms.Textarea(attrs={"rows": 5, "maxlength": str(INSTRUCTIONS_MAX_CHARS)}),
    )

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        _testid(self.fields["auto_checkpoint"], "auto-checkpoint")
        _testid(self.fields["checkpoint_each_message"], "checkpoint-each-message")
        _testid(self.fields["theme"], "theme")
        _testid(self.fields["instructions"], "user-instructions")


class ApiKeyCreateForm(forms.Form):
    name = forms.CharField(
        max_length=API_KEY_NAME_MAX_LENGTH,
        widget=forms.TextInput(attrs={"placeholder": "e.g. my laptop script"}),
    )

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        _testid(self.fields["name"], "api-key-name")
