"""What the model and the page get of an MCP tool's result (`CallToolResult`).

One function, `tool_result_of`, turns every kind of content into one text (what the model
reads, what the tool message stores and the page shows) and a few checked images:

- text: as it is;
- an image: decoded, its bytes checked against the PNG, JPEG, GIF and WebP signatures (the
  declared MIME type is not trusted; SVG is never accepted: it can carry script), at most
  MAX_IMAGE_BYTES each, MAX_IMAGES and MAX_RESULT_IMAGE_BYTES a result. The text names it
  (`[image img-…: image/png, 12,345 bytes]`); the bytes go to the model as image content (to a
  vision model: agents.mcp.vision) and are stored with the tool message. One that is too big,
  does not decode, or is not one of those formats becomes a note in the text instead;
- audio: a note (not passed on);
- an embedded text resource: its URI, MIME type and text, readable by the model (bounded by the
  result's limit); a binary resource and a resource link: a note with name, URI, MIME type and
  size. The server never fetches a link: nothing here leaves the process;
- `structuredContent`: as JSON when the result has no content blocks;
- `isError`: kept for the caller, which fails the call with the text.

The text is scrubbed of the server's credentials before it is cut at `limit` characters.
The bounds are constants: a stored image rides in its tool message's JSON metadata, read with
the branch's history, so it stays small; a model downsizes a bigger picture anyway
(OpenAI scales to at most 2048 px), and a screenshot or chart fits in 1 MiB.
"""

from __future__ import annotations

import base64
import binascii
import json
import uuid
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from mcp.types import (
    AudioContent,
    BlobResourceContents,
    CallToolResult,
    EmbeddedResource,
    ImageContent,
    ResourceLink,
    TextContent,
    TextResourceContents,
)

from .vision import IMAGE_TYPES, MAX_IMAGE_BYTES, image_type_of

if TYPE_CHECKING:
    from collections.abc import Callable

MAX_IMAGES = 4
MAX_RESULT_IMAGE_BYTES = 3 * 1024 * 1024
# A block's text is cut to the result's limit plus this margin before it is scrubbed (a 50 MB
# resource is never scrubbed whole); a secret longer than the margin could straddle the first
# cut, but only past the final one.
SCRUB_MARGIN = 4096


@dataclass(frozen=True)
class ToolImage:
    """One checked image of a result: `mime` read off its bytes."""

    id: str
    mime: str
    data: bytes = field(repr=False)


@dataclass
class ToolResultContent:
    """A result as the model reads it (`text`) and the images that go with it."""

    text: str
    images: list[ToolImage] = field(default_factory=list)
    is_error: bool = False

    def for_agno(self) -> Any:
        """What the tool function returns to agno: the text, or agno's ToolResult with the
        images (agno gives them to the model in a user message after the tool messages)."""
        if not self.images:
            return self.text
        from agno.media import Image
        from agno.tools.function import ToolResult

        images = [Image(id=i.id, content=i.data, mime_type=i.mime) for i in self.images]
        return ToolResult(content=self.text, images=images)


@dataclass
class _Images:
    """The images of one result so far, within its bounds."""

    kept: list[ToolImage] = field(default_factory=list)
    total: int = 0
    dropped: int = 0

    def take(self, block: ImageContent) -> str:
        declared = (block.mime_type or "").lower()
        if declared not in IMAGE_TYPES:
            return f"[image ({declared or 'no type'}) left out: only PNG, JPEG, GIF and WebP]"
        if len(self.kept) >= MAX_IMAGES:
            self.dropped += 1
            return ""
        # Judged by its base64 length first: a 20 MB image is never decoded.
        if _b64_size(block.data) > MAX_IMAGE_BYTES:
            return f"[image ({declared}) left out: larger than {MAX_IMAGE_BYTES:,} bytes]"
        try:
            data = base64.b64decode(block.data, validate=True)
        except (binascii.Error, ValueError):
            return f"[image ({declared}) left out: its data is not valid base64]"
        mime = image_type_of(data)
        if mime is None:
            return f"[image ({declared}) left out: its bytes are not a PNG, JPEG, GIF or WebP]"
        if len(data) > MAX_IMAGE_BYTES:
            return f"[image ({declared}) left out: larger than {MAX_IMAGE_BYTES:,} bytes]"
        if self.total + len(data) > MAX_RESULT_IMAGE_BYTES:
            return (
                f"[image ({mime}) left out: the result's images pass "
                f"{MAX_RESULT_IMAGE_BYTES:,} bytes]"
            )
        image = ToolImage(id=f"img-{uuid.uuid4().hex[:12]}", mime=mime, data=data)
        self.kept.append(image)
        self.total += len(data)
        return f"[image {image.id}: {mime}, {len(data):,} bytes]"


def _b64_size(data: str) -> int:
    """The bytes base64 `data` holds, without decoding it."""
    return max(0, len(data) * 3 // 4 - data[-2:].count("="))


def _resource_text(contents: TextResourceContents, cap: int) -> str:
    head = f"[resource {contents.uri} ({contents.mime_type or 'text'})]"
    return f"{head}\n{contents.text[:cap]}"


def _block_text(block: Any, images: _Images, cap: int) -> str:
    if isinstance(block, TextContent):
        return block.text[:cap]
    if isinstance(block, ImageContent):
        return images.take(block)
    if isinstance(block, AudioContent):
        size = _b64_size(block.data)
        return f"[audio ({block.mime_type}), {size:,} bytes, not passed on]"
    if isinstance(block, ResourceLink):
        name = block.name if block.title in (None, block.name) else f"{block.name} ({block.title})"
        known = f", {block.size:,} bytes" if block.size is not None else ""
        return (
            f"[resource link {name}: {block.uri} ({block.mime_type or 'unknown type'}{known}), "
            "not fetched]"
        )
    if isinstance(block, EmbeddedResource):
        contents = block.resource
        if isinstance(contents, TextResourceContents):
            return _resource_text(contents, cap)
        if isinstance(contents, BlobResourceContents):
            size = _b64_size(contents.blob)
            return (
                f"[binary resource {contents.uri} ({contents.mime_type or 'unknown type'}), "
                f"{size:,} bytes, not shown]"
            )
    return f"[{type(block).__name__} content, not shown]"


def tool_result_of(
    result: CallToolResult, *, limit: int, scrub: Callable[[str], str] | None = None
) -> ToolResultContent:
    """The result as the model reads it and the page shows it: its text (scrubbed, then cut at
    `limit` characters, saying so) and its checked images (see the module's docstring)."""
    images = _Images()
    cap = limit + SCRUB_MARGIN
    parts = [_block_text(block, images, cap) for block in result.content]
    if images.dropped:
        parts.append(f"[{images.dropped} more images left out: at most {MAX_IMAGES} a result]")
    if not result.content and result.structured_content is not None:
        dumped = json.dumps(result.structured_content, ensure_ascii=False, default=str)
        parts.append(dumped[:cap])
    text = "\n".join(part for part in parts if part)
    if scrub is not None:
        text = scrub(text)
    if len(text) > limit:
        text = f"{text[:limit]}\n… (the result was cut at {limit} characters)"
    kept = [image for image in images.kept if image.id in text]  # an image whose line was cut
    return ToolResultContent(text=text, images=kept, is_error=bool(result.is_error))
