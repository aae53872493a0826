"""The REST API's JSON parser (REST_FRAMEWORK's DEFAULT_PARSER_CLASSES).

A module of its own: DRF imports its parser classes while `rest_framework.views` is still being
imported, so this module must not import that (`core.api` does).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import IO, Any

from rest_framework import parsers
from rest_framework.exceptions import ParseError

from core.validation import DOCUMENT_MAX_DEPTH, json_too_deep


class JSONParser(parsers.JSONParser):
    """DRF's JSON parser, refusing a body nested deeper than DOCUMENT_MAX_DEPTH (400) instead of
    letting Python's recursion limit answer 500, here or in any code that walks the data."""

    def parse(
        self,
        stream: IO[Any],
        media_type: str | None = None,
        parser_context: Mapping[str, Any] | None = None,
    ) -> dict[str, Any]:
        too_deep = ParseError(
            f"JSON parse error - the body is nested more than {DOCUMENT_MAX_DEPTH} levels deep."
        )
        try:
            data = super().parse(stream, media_type, parser_context)
        except RecursionError:
            raise too_deep from None
        if json_too_deep(data, DOCUMENT_MAX_DEPTH):
            raise too_deep
        return data
