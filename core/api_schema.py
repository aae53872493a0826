"""The OpenAPI schema (drf-spectacular): the contract's error answers on every operation, and
the paginated list shape."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from drf_spectacular.openapi import AutoSchema as SpectacularAutoSchema
from drf_spectacular.utils import inline_serializer
from rest_framework import serializers

if TYPE_CHECKING:
    from drf_spectacular.utils import Direction


class ErrorOut(serializers.Serializer[Mapping[str, object]]):
    detail = serializers.CharField()


ERRORS = {
    "400": "Bad input",
    "401": "No or invalid credentials",
    "403": "Not allowed",
    "404": "Missing, or not yours",
    "409": "Conflict (for example a turn already running)",
    "413": "Too large",
    "429": "Too many requests (see Retry-After)",
}


def paginated(
    serializer_class: type[serializers.BaseSerializer[Any]], name: str
) -> serializers.Serializer[Any]:
    return inline_serializer(
        name=f"Paginated{name}List",
        fields={
            "count": serializers.IntegerField(),
            "next": serializers.URLField(allow_null=True),
            "previous": serializers.URLField(allow_null=True),
            "results": serializer_class(many=True),
        },
    )


class AutoSchema(SpectacularAutoSchema):
    """drf-spectacular's schema, with the contract's error answers on every operation."""

    def _get_response_bodies(self, direction: Direction = "response") -> dict[str, Any]:
        responses = super()._get_response_bodies(direction)
        if direction == "response":
            for code, text in ERRORS.items():
                if code not in responses:
                    body = self._get_response_for_code(  # type: ignore[no-untyped-call]
                        ErrorOut, code, direction=direction
                    )  # drf-spectacular is untyped
                    body["description"] = text
                    responses[code] = body
        return responses
