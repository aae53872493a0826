"""What every endpoint of the REST API shares: errors as {"detail": ...}, strict input,
limit/offset pagination. The pagination is the pages' too: one rule for what an offset or a
count may be (`non_negative`), one paginator for every API list (`Pagination`, through
`paginate` and `paginate_range`), and one window for the pages' lists that load more as they
scroll (`window`)."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Protocol, TypeVar

from django.core.exceptions import RequestDataTooBig
from django.db.models import QuerySet
from django.http import Http404
from rest_framework import serializers, status
from rest_framework.exceptions import ValidationError
from rest_framework.pagination import LimitOffsetPagination
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.serializers import BaseSerializer
from rest_framework.views import APIView
from rest_framework.views import exception_handler as drf_exception_handler

from core.errors import HTTP_STATUS, DomainError, InvalidInput, renderable
from core.renderers import JSONRenderer

# The largest offset a list takes: far past any list, and within what every database's integers
# hold (a larger one would overflow the query).
OFFSET_MAX = 2**53

T = TypeVar("T")
T_co = TypeVar("T_co", covariant=True)


class Sliceable(Protocol[T_co]):
    """A list, or a queryset: what a window is cut from."""

    def __getitem__(self, index: slice, /) -> Iterable[T_co]: ...


class Pagination(LimitOffsetPagination):
    """`?limit=` (default 50; above 1000 is 1000) and `?offset=` (default 0). Each, when given,
    is a non-negative integer written in digits, or the request is a 400: DRF's own would
    answer a page of the default size to `limit=-1` or `offset=abc`, which the client did not
    ask for. `limit=0` answers the count alone."""

    default_limit = 50
    max_limit = 1000

    def get_limit(self, request: Request) -> int:
        limit = non_negative(request.query_params, self.limit_query_param)
        return self.default_limit if limit is None else min(limit, self.max_limit)

    def get_offset(self, request: Request) -> int:
        offset = non_negative(request.query_params, self.offset_query_param)
        if offset is not None and offset > OFFSET_MAX:
            raise InvalidInput(f"offset must be at most {OFFSET_MAX}.")
        return offset or 0

    def get_next_link(self) -> str | None:
        if self.limit == 0:  # the count alone: no page to go on to
            return None
        return super().get_next_link()

    def get_previous_link(self) -> str | None:
        if self.limit == 0:
            return None
        return super().get_previous_link()


def non_negative(params: Mapping[str, Any], name: str) -> int | None:
    """A parameter (of a query string or a form) that is a non-negative integer written in
    digits (None when absent or empty); anything else is InvalidInput (a 400)."""
    raw = params.get(name)
    if raw in (None, ""):
        return None
    if not (raw.isascii() and raw.isdigit()):
        raise InvalidInput(f"{name} must be a non-negative integer, like 0 or 50.")
    # More digits than any count has are past every list (and int() refuses 4,300 digits).
    return int(raw) if len(raw) <= 20 else OFFSET_MAX + 1


def paginate(
    view: APIView,
    queryset: QuerySet[Any] | Sequence[Any],
    serializer: type[BaseSerializer[Any]],
    context: dict[str, Any] | None = None,
) -> Response:
    """A list answer through DRF's paginator: the contract's count, next, previous, results
    (of a queryset, or of a list already read)."""
    paginator = Pagination()
    page = paginator.paginate_queryset(queryset, view.request, view=view)
    data = serializer(page or [], many=True, context=context or {}).data
    return paginator.get_paginated_response(data)


def paginate_range(
    view: APIView, *, count: int, rows: Callable[[int, int], Sequence[Any]]
) -> Response:
    """A list answer of a list whose length is known and whose rows are read by range
    (`rows(start, end)`, already in their answer's shape): a history, whose positions are
    dense, needs no COUNT(*) and no serializer per value."""
    paginator = Pagination()
    request = view.request
    paginator.limit = limit = paginator.get_limit(request)
    paginator.offset = offset = paginator.get_offset(request)
    paginator.count = count
    paginator.request = request
    return paginator.get_paginated_response(list(rows(offset, offset + limit)))


def window(items: Sliceable[T], *, offset: int, size: int) -> tuple[list[T], bool]:
    """The `size` items from `offset` of a list that loads more as it scrolls (the pages'), and
    whether more follow: one row more is read, never a COUNT(*)."""
    rows = list(items[offset : offset + size + 1])
    return rows[:size], len(rows) > size


def body_fingerprint(data: object) -> str:
    """A digest of a body as validated (defaults filled in), the same whatever its spacing or
    key order: what an Idempotency-Key is stored with, to tell a retry from another request
    reusing the key."""
    text = json.dumps(data, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


def _flatten(errors: object, prefix: str = "") -> list[str]:
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
    # DRF's messages quote what was sent (an unknown field's name, a choice that is not one):
    # quoted as escapes, a lone surrogate in it cannot make the answer unencodable.
    response.data = _renderable(response.data)
    return response


def _renderable(data: object) -> object:
    """Error data with `core.errors.renderable` applied to every text in it, keys included."""
    if isinstance(data, str):
        return renderable(data)
    if isinstance(data, dict):
        return {_renderable(key): _renderable(value) for key, value in data.items()}
    if isinstance(data, list | tuple):
        return [_renderable(item) for item in data]
    return data


class JSONErrors(APIView):
    """For an API view whose answers are not JSON (the schema in YAML, the docs page): its
    errors (405, 406, 429, ...) are the contract's JSON {"detail"} all the same, not YAML or an
    HTML page."""

    def finalize_response(
        self, request: Request, response: Response, *args: Any, **kwargs: Any
    ) -> Response:
        if isinstance(response, Response) and response.status_code >= 400:
            request.accepted_renderer = JSONRenderer()
            request.accepted_media_type = JSONRenderer.media_type
        return super().finalize_response(request, response, *args, **kwargs)


class StrictSerializer(serializers.Serializer[Any]):  # input only: no instance
    """Input that names only known fields, as a JSON object."""

    @classmethod
    def validated(cls, data: Any) -> dict[str, Any]:
        serializer = cls(data=data)
        serializer.is_valid(raise_exception=True)
        validated: dict[str, Any] = serializer.validated_data
        return validated

    def to_internal_value(self, data: object) -> dict[str, Any]:
        if isinstance(data, dict):
            unknown = sorted(set(data) - set(self.fields))
            if unknown:
                raise ValidationError({name: ["Unknown field."] for name in unknown})
        value: dict[str, Any] = super().to_internal_value(data)
        return value


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
