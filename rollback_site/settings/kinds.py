"""The kinds of value a setting takes from the environment, and how a bad one stops the start.

`Schema` reads the environment (pydantic-settings): a value is stripped of surrounding spaces, and
an empty one means the default. A value its field refuses stops the start with
ImproperlyConfigured naming the variable, the value and what it accepts, e.g.
`ROLLBACK_WS_CATCH_UP_SECONDS='abc' is not valid: it must be a number of seconds, at least 0.05.`
What a field accepts is said from its type and bounds (`accepts`), or by an `Accepts` note.
"""

from __future__ import annotations

import json
import os
import types
from typing import Annotated, Any, Literal, Self, Union, get_args, get_origin

import annotated_types
from django.core.exceptions import ImproperlyConfigured
from pydantic import BeforeValidator, Field, ValidationError, ValidationInfo
from pydantic.fields import FieldInfo
from pydantic_settings import (
    BaseSettings,
    EnvSettingsSource,
    NoDecode,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
)


class Unit:
    """What a number counts, for the message (`a number of seconds above 0`)."""

    def __init__(self, name: str) -> None:
        self.name = name


class Accepts:
    """What a field accepts, in words, where its type and bounds do not say it."""

    def __init__(self, text: str) -> None:
        self.text = text


def _comma_list(value: Any) -> Any:
    if isinstance(value, str):
        return [item.strip() for item in value.split(",") if item.strip()]
    return value


def _json_or_comma_list(value: Any, info: ValidationInfo) -> Any:
    """A JSON list of strings (`["a.b", "c.d"]`) or a comma-separated list."""
    if not (isinstance(value, str) and value.startswith("[")):
        return _comma_list(value)
    try:
        items = json.loads(value)
    except ValueError as exc:
        raise ValueError(f"{info.field_name} is not a valid JSON list: {exc}") from None
    if not isinstance(items, list) or not all(isinstance(item, str) for item in items):
        raise ValueError(f"{info.field_name} must be a JSON list of strings, or comma-separated.")
    return [item.strip() for item in items if item.strip()]


# A duration in seconds, above 0.
Seconds = Annotated[float, Field(gt=0), Unit("seconds")]
# A duration in seconds bounded by its field (`Field(0.5, ge=0.05)`): pydantic keeps one bound of
# each kind, the type's over the field's, so Seconds cannot take a tighter `gt`.
BoundSeconds = Annotated[float, Unit("seconds")]
# A whole number of 0 or more (often: 0 turns a limit off).
Count = Annotated[int, Field(ge=0)]
# A comma-separated list (`a, b`); spaces around each item do not count.
CommaList = Annotated[list[str], NoDecode, BeforeValidator(_comma_list)]
# A JSON list of strings or a comma-separated list.
JsonOrCommaList = Annotated[list[str], NoDecode, BeforeValidator(_json_or_comma_list)]


def shown(text: str, default: Any = None, **bounds: Any) -> Any:
    """A field whose default the README says in words (`text`): computed from other settings
    when the variable is unset (`default` until then), or not one value."""
    return Field(default, json_schema_extra={"shown": text}, **bounds)


def accepts(field: FieldInfo) -> str:
    """What `field` accepts, in words: `a whole number of 0 or more`, `one of text, json`."""
    for note in field.metadata:
        if isinstance(note, Accepts):
            return note.text
    kind = _without_none(field.annotation)
    if get_origin(kind) is Literal:
        return "one of " + ", ".join(str(choice) for choice in get_args(kind))
    if kind is bool:
        return "1, true, yes or on, or 0, false, no or off"
    unit = next((f" of {note.name}" for note in field.metadata if isinstance(note, Unit)), "")
    if kind is int:
        return f"a whole number{unit}{_bounds(field, unit=bool(unit))}"
    if kind is float:
        return f"a number{unit}{_bounds(field, unit=bool(unit))}"
    return "text"


def _without_none(annotation: Any) -> Any:
    if get_origin(annotation) in (Union, types.UnionType):
        kinds = [kind for kind in get_args(annotation) if kind is not type(None)]
        return kinds[0] if len(kinds) == 1 else annotation
    return annotation


def _bounds(field: FieldInfo, *, unit: bool) -> str:
    """The tightest bounds: ` of 0 or more` (`, at least 1` after a unit), ` above 0`, then
    `, at most 10`."""
    lows: list[tuple[float, bool]] = []  # (bound, whether the bound itself is refused)
    highs: list[float] = []
    for bound in field.metadata:
        if isinstance(bound, annotated_types.Ge):
            lows.append((float(bound.ge), False))  # type: ignore[arg-type]  # a number here
        elif isinstance(bound, annotated_types.Gt):
            lows.append((float(bound.gt), True))  # type: ignore[arg-type]
        elif isinstance(bound, annotated_types.Le):
            highs.append(float(bound.le))  # type: ignore[arg-type]
    said = ""
    if lows:
        low, strict = max(lows)
        if strict:
            said = f" above {low:g}"
        else:
            said = f", at least {low:g}" if unit else f" of {low:g} or more"
    if highs:
        said += f", at most {min(highs):g}"
    return said


class _StrippedEnvironment(EnvSettingsSource):
    """The process's environment, each value stripped; an empty value means the default."""

    def prepare_field_value(
        self, field_name: str, field: FieldInfo, value: Any, value_is_complex: bool
    ) -> Any:
        if isinstance(value, str):
            value = value.strip() or None
        return super().prepare_field_value(field_name, field, value, value_is_complex)


class Schema(BaseSettings):
    """Every variable is a field named as the variable, with its type, default and bounds."""

    model_config = SettingsConfigDict(
        case_sensitive=True,
        enable_decoding=False,  # lists are comma-separated (or JSON where a field says so)
        allow_inf_nan=False,
        validate_default=False,  # the defaults are as declared
        frozen=True,
    )

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        return init_settings, _StrippedEnvironment(settings_cls)

    @classmethod
    def load(cls) -> Self:
        """The environment as it is now, or ImproperlyConfigured naming each bad value."""
        try:
            return cls()
        except ValidationError as exc:
            problems = [cls.problem(error) for error in exc.errors()]
            raise ImproperlyConfigured("\n".join(dict.fromkeys(problems))) from None

    @classmethod
    def problem(cls, error: Any) -> str:
        """One bad value in words. A validator's own message names its variable itself."""
        if error["type"] == "value_error":
            return str(error["ctx"]["error"])
        name = str(error["loc"][0])
        field = cls.model_fields[name]
        raw = os.environ.get(name, "").strip()
        why = f" ({field.description})" if field.description else ""
        return f"{name}={raw!r} is not valid: it must be {accepts(field)}{why}."

    @classmethod
    def shown_default(cls, name: str) -> str:
        """The default of `name` as the README's configuration table writes it."""
        field = cls.model_fields[name]
        extra = field.json_schema_extra
        if isinstance(extra, dict) and "shown" in extra:
            return str(extra["shown"])
        default = field.default
        if default in (None, "", []):
            return "unset"
        if isinstance(default, bool):
            return "on" if default else "off"
        if isinstance(default, float) and default.is_integer():
            default = int(default)
        if isinstance(default, list):
            default = ",".join(default)
        return f"`{default}`"
