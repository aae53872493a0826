"""Which models see a tool's images, and the images as agno gives them to the model.

The Chat Completions API takes no image in a `tool` message. agno 3.1 (models/base.py,
`_handle_function_call_media`) takes the images of a tool's `ToolResult` off its tool message
and, when the agent's `send_media_to_model` is on, adds one user message after the batch's tool
messages ("The tool call above generated the attached media.") holding them as image parts.
That is the path used here, for the turn's own calls; `to_agno` rebuilds the same message for
the history, with the last REPLAY_IMAGES images only (each costs the model's tokens on every
turn). A model whose name matches none of AGENT_VISION_MODELS, and the demo model, gets no
image: `send_media_to_model` is off and it reads the image's line in the result text.
Imports neither the MCP SDK nor the agent: agents.history uses it.
"""

from __future__ import annotations

import base64
import binascii
import re
from fnmatch import fnmatchcase
from typing import TYPE_CHECKING, Any

from django.conf import settings

if TYPE_CHECKING:
    from agno.media import Image

# What a page may show inline and a model accepts: never SVG (it can carry script).
IMAGE_TYPES = ("image/png", "image/jpeg", "image/gif", "image/webp")
# The bytes of one image a model is given (a tool's, an attached one, one read_file opens).
MAX_IMAGE_BYTES = 1024 * 1024
# How many of the history's tool images a vision model gets again on a later turn.
REPLAY_IMAGES = 4
# agno's own text for the user message that carries a tool's media (models/base.py).
MEDIA_NOTE = "The tool call above generated the attached media."


def image_type_of(data: bytes) -> str | None:
    """The image type the bytes' signature shows, or None (not one of IMAGE_TYPES)."""
    if data.startswith(b"\x89PNG\r\n\x1a\n"):
        return "image/png"
    if data.startswith(b"\xff\xd8\xff"):
        return "image/jpeg"
    if data.startswith((b"GIF87a", b"GIF89a")):
        return "image/gif"
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "image/webp"
    return None


def sees_images(model: Any) -> bool:
    """Whether `model` (an agno Model) is given tools' images: not the demo model, and its
    name matches one of AGENT_VISION_MODELS."""
    from ..demo_model import DemoModel

    if model is None or isinstance(model, DemoModel):
        return False
    name = str(getattr(model, "id", "") or "")
    patterns = getattr(settings, "AGENT_VISION_MODELS", [])
    return any(fnmatchcase(name, str(pattern)) for pattern in patterns)


def stored_images(metadata: Any) -> list[dict[str, Any]]:
    """A tool message's stored images (`metadata["images"]`), the well-formed ones."""
    images = metadata.get("images") if isinstance(metadata, dict) else None
    if not isinstance(images, list):
        return []
    return [
        i
        for i in images
        if isinstance(i, dict) and isinstance(i.get("data"), str) and isinstance(i.get("id"), str)
    ]


def image_bytes(stored: dict[str, Any]) -> bytes | None:
    try:
        return base64.b64decode(str(stored.get("data", "")), validate=True)
    except (binascii.Error, ValueError):
        return None


def checked_image(stored: dict[str, Any]) -> tuple[str, bytes] | None:
    """A stored image's type and bytes, when its bytes are still what its type says."""
    data = image_bytes(stored)
    mime = image_type_of(data) if data else None
    if data is None or mime is None or mime != stored.get("mime"):
        return None
    return mime, data


def agno_image(stored: dict[str, Any]) -> Image | None:
    from agno.media import Image

    data = image_bytes(stored)
    if not data:
        return None
    return Image(id=stored["id"], content=data, mime_type=str(stored.get("mime") or ""))


# The line the composer adds to a message for the files it attached (static/rollback/attach.js):
# "Attached: `a.png`, `b.pdf`".
ATTACHED_LINE = re.compile(r"^Attached: (.+)$", re.MULTILINE)
ATTACHED_NAME = re.compile(r"`([^`\n]+)`")
# The attached images a vision model is given with one message, and the names looked at for them.
MAX_ATTACHED_IMAGES = 4
MAX_ATTACHED_NAMES = 20


def attached_images(branch: Any, message: str) -> list[Image]:
    """The images a message's "Attached:" line names (at most MAX_ATTACHED_IMAGES, each a PNG,
    JPEG, GIF or WebP of the workspace within MAX_IMAGE_BYTES), for a model that sees images:
    they go with the message as image content. A name that is no such file is left out: the
    model reads the line, and can open it with read_file."""
    from agno.media import Image

    from core.errors import DomainError
    from workspace.selectors import workspace_file_bytes

    names = [n for line in ATTACHED_LINE.findall(message) for n in ATTACHED_NAME.findall(line)]
    images: list[Image] = []
    # Each name looked at costs two reads: a line naming hundreds of files costs a bounded few.
    for name in list(dict.fromkeys(names))[:MAX_ATTACHED_NAMES]:
        if len(images) >= MAX_ATTACHED_IMAGES:
            break
        try:
            found, content = workspace_file_bytes(branch, name)
        except DomainError:
            continue
        mime = image_type_of(content.raw)
        if mime is not None and content.size <= MAX_IMAGE_BYTES:
            images.append(Image(id=f"att-{found.blob}", content=content.raw, mime_type=mime))
    return images


def images_of_result(text: str, images: list[Image] | None) -> list[dict[str, Any]]:
    """The images of a run (`RunOutput.images`) that a tool result's text names, as its
    message stores them (agents.mcp.results names each `[image <id>: ...]`)."""
    kept: list[dict[str, Any]] = []
    for image in images or []:
        data = image.content
        if image.id and data and f"[image {image.id}:" in text:
            kept.append(
                {
                    "id": image.id,
                    "mime": image.mime_type or "",
                    "bytes": len(data),
                    "data": base64.b64encode(data).decode("ascii"),
                }
            )
    return kept
