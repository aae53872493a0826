"""What every endpoint of the REST API shares: errors as {"detail": ...}, strict input,
limit/offset pagination."""

from __future__ import annotations

from typing import Any

from django.core.exceptions import RequestDataTooBig
from django.db.models import QuerySet
from django.http import Http404
from rest_framework import serializers, status
from rest_framework.exceptions import ValidationError
from rest_framework.pagination import LimitOffsetPagination
from rest_framework.response import Response
from rest_framework.serializers import BaseSerializer
from rest_framework.views import APIView
from rest_framework.views import exception_handler as drf_exception_handler

from core.errors import HTTP_STATUS, DomainError


class Pagination(LimitOffsetPagination):
    default_limit = 50
    max_limit = 1000


def paginate(
    view: APIView,
    queryset: QuerySet[Any],
    serializer: type[BaseSerializer],
    context: dict[str, Any] | None = None,
) -> Response:
    """A list answer through DRF's paginator: the contract's count, next, previous, results."""
    paginator = Pagination()
    page = paginator.paginate_queryset(queryset, view.request, view=view)
    data = serializer(page, many=True, context=context or {}).data
    return paginator.get_paginated_response(data)


def _flatten(errors: Any, prefix: str = "") -> list[str]:
    if isinstance(errors, dict):
        out = []
        for key, value in errors.items():
            name = "" if key in ("non_field_errors", "detail") else str(key)
            out += _flatten(value, f"{prefix}.{name}" if prefix and name else name or prefix)
        return out
    if isinstance(errors, list):
        return [line for item in errors for line in _flatten(item, prefix)]
    return [f"{prefix}: {errors}" if prefix else str(errors)]


def exception_handler(exc: Exception, context: dict[str, Any]) -> Response | None:
    """Domain errors by their code; DRF's own errors as one readable `detail` string (with the
    field-by-field `errors` too, for validation)."""
    if isinstance(exc, DomainError):
        return Response({"detail": exc.message}, status=HTTP_STATUS.get(exc.code, 400))
    if isinstance(exc, Http404):
        return Response({"detail": "Not found."}, status=status.HTTP_404_NOT_FOUND)
    if isinstance(exc, RequestDataTooBig):
        return Response(
            {"detail": "The request body is too large."},
            status=status.HTTP_413_REQUEST_ENTITY_TOO_LARGE,
        )
    response = drf_exception_handler(exc, context)
    if response is None:
        return None
    if isinstance(exc, ValidationError):
        response.data = {"detail": "; ".join(_flatten(response.data)), "errors": response.data}
    elif isinstance(response.data, dict) and "detail" in response.data:
        response.data = {"detail": str(response.data["detail"])}
    return response


class StrictSerializer(serializers.Serializer):
    """Input that names only known fields, as a JSON object."""

    @classmethod
    def validated(cls, data: Any) -> dict[str, Any]:
        serializer = cls(data=data)
        serializer.is_valid(raise_exception=True)
        return serializer.validated_data

    def to_internal_value(self, data: object) -> dict[str, Any]:
        if isinstance(data, dict):
            unknown = sorted(set(data) - set(self.fields))
            if unknown:
                raise ValidationError({name: ["Unknown field."] for name in unknown})
        return super().to_internal_value(data)


class TextField(serializers.CharField):
    """A string, and only a string (DRF's CharField would take 5 as "5")."""

    def to_internal_value(self, data: object) -> str:
        if not isinstance(data, str):
            self.fail("invalid")
        return super().to_internal_value(data)


class StrictBooleanField(serializers.BooleanField):
    def to_internal_value(self, data: object) -> bool:
        if not isinstance(data, bool):
            self.fail("invalid", input=data)
        return data


class JSONObjectField(serializers.JSONField):
    def to_internal_value(self, data: object) -> dict[str, Any] | list[dict[str, Any]]:
        if not isinstance(data, dict):
            raise ValidationError("Must be a JSON object.")
        return super().to_internal_value(data)
