"""The REST API's JSON parser (REST_FRAMEWORK's DEFAULT_PARSER_CLASSES).

A module of its own: DRF imports its parser classes while `rest_framework.views` is still being
imported, so this module must not import that (`core.api` does).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import IO, Any

from rest_framework import parsers
from rest_framework.exceptions import ParseError

from core.errors import renderable
from core.validation import DOCUMENT_MAX_DEPTH, json_too_deep, lone_surrogate_at


class JSONParser(parsers.JSONParser):
    """DRF's JSON parser, refusing with 400 what no view should ever see: a body nested deeper
    than DOCUMENT_MAX_DEPTH (instead of letting Python's recursion limit answer 500, here or in
    any code that walks the data), and a lone surrogate anywhere in it, in a key or a value
    (`"\\ud800"` is valid JSON but not Unicode: no database stores it, and no answer quoting
    it can be encoded). Bytes that are not UTF-8 are refused by DRF's own parser."""

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
        where = lone_surrogate_at(data)
        if where is not None:
            raise ParseError(
                "JSON parse error - the body holds a lone surrogate (U+D800 to U+DFFF), which "
                f"is not valid Unicode, at {renderable(where)}."
            )
        return data
