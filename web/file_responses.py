"""A workspace file as an HTTP answer, for the page's download and the API's GET alike: text as
`text/plain; charset=utf-8` whatever its name (an .html or .svg file is never rendered), any
other bytes as the type its name says (else application/octet-stream), always as an attachment,
with `nosniff`, so a browser never runs or shows a file as part of the site."""

from __future__ import annotations

import mimetypes
from urllib.parse import quote

from django.http import HttpResponse

from workspace.validation import FileContent

# The image types the Files panel may show inline (never SVG: a script can hide in it).
PREVIEWED_IMAGES = frozenset({"image/png", "image/jpeg", "image/gif", "image/webp"})


def binary_type(path: str) -> str:
    guessed, _ = mimetypes.guess_type(path, strict=False)
    return guessed or "application/octet-stream"


def file_response(path: str, content: FileContent, *, inline: bool = False) -> HttpResponse:
    if content.text is not None:
        response = HttpResponse(content.text, content_type="text/plain; charset=utf-8")
    else:
        response = HttpResponse(content.raw, content_type=binary_type(path))
    name = path.rsplit("/", 1)[-1]
    ascii_name = name.encode("ascii", "ignore").decode().replace('"', "").replace("\\", "")
    kind = "inline" if inline else "attachment"
    response["Content-Disposition"] = (
        f"{kind}; filename=\"{ascii_name or 'file'}\"; filename*=UTF-8''{quote(name)}"
    )
    response["X-Content-Type-Options"] = "nosniff"
    return response
