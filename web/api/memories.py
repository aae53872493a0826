"""REST API for the user's memories (/api/v1/memories/). A memory belongs to its user, not to a
session or a branch: no restore or rewind touches it. Another user's memory is a 404."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers, status
from rest_framework.exceptions import NotAuthenticated
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from accounts.models import User
from core.api import StrictSerializer, TextField, paginate
from core.api_schema import paginated
from core.validation import clean_search
from memories.models import Category, Memory
from memories.selectors import get_memory_for_user, memories_listed
from memories.services import memory_create, memory_delete, memory_update


class MemoryOut(serializers.Serializer[Memory]):
    id = serializers.IntegerField()
    key = serializers.CharField()
    category = serializers.ChoiceField(choices=Category.values)
    l0_abstract = serializers.CharField(help_text="One line.")
    l1_overview = serializers.CharField(help_text="Two or three sentences.")
    l2_details = serializers.CharField(help_text="The details (Markdown).")
    confidence = serializers.FloatField(help_text="From 0 to 1.")
    access_count = serializers.IntegerField(help_text="How many recalls returned it.")
    created_at = serializers.DateTimeField()
    updated_at = serializers.DateTimeField()


class StrictFloatField(serializers.FloatField):
    """A JSON number, and only a number (DRF's FloatField would take "0.5" and true)."""

    def to_internal_value(self, data: object) -> float:
        if isinstance(data, bool) or not isinstance(data, int | float):
            self.fail("invalid")
        return super().to_internal_value(data)


def _text(required: bool, help_text: str) -> TextField:
    # The memory service checks the content and the lengths (400, or 413 for the details).
    return TextField(
        required=required, allow_blank=True, trim_whitespace=False, help_text=help_text
    )


class MemoryIn(StrictSerializer):
    key = _text(False, "A short identifier, unique among your memories (kept in lower case).")
    category = _text(False, "One of " + ", ".join(Category.values) + ".")
    l0_abstract = _text(False, "One line, at most 200 characters.")
    l1_overview = _text(False, "Two or three sentences, at most 1,000 characters.")
    l2_details = _text(False, "The details (Markdown), at most MEMORY_L2_MAX_CHARS characters.")
    confidence = StrictFloatField(required=False, help_text="From 0 to 1 (default 1).")


class MemoryCreateIn(MemoryIn):
    key = _text(True, "A short identifier, unique among your memories (kept in lower case).")
    category = _text(True, "One of " + ", ".join(Category.values) + ".")
    l0_abstract = _text(True, "One line, at most 200 characters.")


def _user(request: Request) -> User:
    user = request.user
    if not isinstance(user, User):  # IsAuthenticated, the default permission, lets only users in
        raise NotAuthenticated()
    return user


class MemoryList(APIView):
    @extend_schema(
        operation_id="memories_list",
        parameters=[
            OpenApiParameter(
                "q",
                str,
                description="only memories holding every word of this, best match first (a "
                "match in the key or L0 first, then L1, then L2)",
            )
        ],
        responses=paginated(MemoryOut, "Memory"),
        summary="Your memories: newest first, or best match first with q",
    )
    def get(self, request: Request) -> Response:
        query = clean_search(request.query_params.get("q"))
        return paginate(self, memories_listed(request.user, query=query), MemoryOut)

    @extend_schema(
        request=MemoryCreateIn,
        responses={201: MemoryOut},
        summary="A new memory (409 when you have one with that key)",
    )
    def post(self, request: Request) -> Response:
        data: dict[str, Any] = MemoryCreateIn.validated(request.data)
        memory = memory_create(user=_user(request), **data)
        return Response(MemoryOut(memory).data, status=status.HTTP_201_CREATED)


class MemoryDetail(APIView):
    @extend_schema(responses=MemoryOut, summary="One of your memories")
    def get(self, request: Request, pk: int) -> Response:
        return Response(MemoryOut(get_memory_for_user(request.user, pk)).data)

    @extend_schema(
        request=MemoryIn,
        responses=MemoryOut,
        summary="Change a memory (409 when the new key is another memory's)",
    )
    def patch(self, request: Request, pk: int) -> Response:
        memory = get_memory_for_user(request.user, pk)
        data = MemoryIn.validated(request.data)
        memory = memory_update(memory=memory, **data)
        return Response(MemoryOut(memory).data)

    @extend_schema(responses={204: None}, summary="Delete a memory")
    def delete(self, request: Request, pk: int) -> Response:
        memory_delete(memory=get_memory_for_user(request.user, pk))
        return Response(status=status.HTTP_204_NO_CONTENT)
