"""agents.mcp.results: every kind of MCP content, as the model reads it and the page stores it,
within its bounds; each fault gives a clear note and the text part still arrives."""

from __future__ import annotations

import base64

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

from agents.mcp.results import (
    MAX_IMAGE_BYTES,
    MAX_IMAGES,
    MAX_RESULT_IMAGE_BYTES,
    image_type_of,
    tool_result_of,
)
from tests.fakes.mcp_server import tiny_png

LIMIT = 20_000


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def text(s: str) -> TextContent:
    return TextContent(type="text", text=s)


def image(data: str, mime: str = "image/png") -> ImageContent:
    return ImageContent(type="image", data=data, mime_type=mime)


def result(*blocks, **kwargs) -> CallToolResult:
    return CallToolResult(content=list(blocks), **kwargs)


def test_an_image_is_checked_named_in_the_text_and_kept():
    png = tiny_png()
    got = tool_result_of(result(text("Here:"), image(b64(png))), limit=LIMIT)

    [kept] = got.images
    assert kept.mime == "image/png"
    assert kept.data == png
    assert got.text == f"Here:\n[image {kept.id}: image/png, {len(png):,} bytes]"


def test_the_type_is_read_off_the_bytes_not_the_declared_one():
    jpeg = b"\xff\xd8\xff\xe0" + b"\x00" * 40
    got = tool_result_of(result(image(b64(jpeg), "image/png")), limit=LIMIT)

    assert got.images[0].mime == "image/jpeg"
    assert image_type_of(b"GIF89a....") == "image/gif"
    assert image_type_of(b"RIFF\x00\x00\x00\x00WEBPVP8 ") == "image/webp"


def test_an_image_of_20_mb_is_left_out_with_a_note_and_the_text_arrives():
    huge = b64(tiny_png() + b"\x00" * (20 * 1024 * 1024))
    got = tool_result_of(result(text("The scan:"), image(huge)), limit=LIMIT)

    assert got.images == []
    assert got.text == (
        f"The scan:\n[image (image/png) left out: larger than {MAX_IMAGE_BYTES:,} bytes]"
    )


def test_a_result_of_200_images_keeps_the_first_few_and_says_how_many_were_left_out():
    png = b64(tiny_png())
    got = tool_result_of(result(text("Frames"), *[image(png)] * 200), limit=LIMIT)

    assert len(got.images) == MAX_IMAGES
    assert got.text.startswith("Frames\n")
    assert got.text.endswith(f"[{200 - MAX_IMAGES} more images left out: at most 4 a result]")
    assert len(got.text) < 2000


def test_the_images_of_one_result_are_bounded_together():
    big = b64(tiny_png() + b"\x00" * (MAX_IMAGE_BYTES - 200))
    got = tool_result_of(result(*[image(big)] * 4), limit=LIMIT)

    assert sum(len(i.data) for i in got.images) <= MAX_RESULT_IMAGE_BYTES
    assert len(got.images) == 3
    assert f"the result's images pass {MAX_RESULT_IMAGE_BYTES:,} bytes" in got.text


def test_base64_that_does_not_decode_gives_a_note():
    got = tool_result_of(result(text("ok"), image("not base64 at all!!")), limit=LIMIT)

    assert got.images == []
    assert got.text == "ok\n[image (image/png) left out: its data is not valid base64]"


def test_a_mime_type_that_lies_gives_a_note():
    html = b64(b"<html><script>alert(1)</script></html>")
    got = tool_result_of(result(image(html, "image/png")), limit=LIMIT)

    assert got.images == []
    assert got.text == "[image (image/png) left out: its bytes are not a PNG, JPEG, GIF or WebP]"


def test_an_svg_is_never_accepted():
    svg = b64(b'<svg xmlns="http://www.w3.org/2000/svg"><script>alert(1)</script></svg>')
    got = tool_result_of(result(image(svg, "image/svg+xml")), limit=LIMIT)

    assert got.images == []
    assert got.text == "[image (image/svg+xml) left out: only PNG, JPEG, GIF and WebP]"


def test_a_text_resource_is_readable_with_its_uri_and_type():
    notes = TextResourceContents(uri="file:///notes.md", mime_type="text/markdown", text="# Plan")
    got = tool_result_of(result(EmbeddedResource(type="resource", resource=notes)), limit=LIMIT)

    assert got.text == "[resource file:///notes.md (text/markdown)]\n# Plan"


def test_a_resource_of_50_mb_of_text_is_cut_at_the_limit_saying_so():
    big = TextResourceContents(uri="file:///big.log", mime_type="text/plain", text="x" * 50_000_000)
    got = tool_result_of(
        result(text("The log:"), EmbeddedResource(type="resource", resource=big)),
        limit=LIMIT,
        scrub=lambda s: s.replace("secret", "[hidden]"),
    )

    assert got.text.startswith("The log:\n[resource file:///big.log (text/plain)]\nxxx")
    assert got.text.endswith(f"\n… (the result was cut at {LIMIT} characters)")
    assert len(got.text) < LIMIT + 100


def test_a_binary_resource_and_a_link_are_named_not_fetched():
    blob = BlobResourceContents(uri="file:///a.bin", mime_type="application/zip", blob=b64(b"PK!!"))
    link = ResourceLink(
        type="resource_link",
        name="report",
        title="Q3 report",
        uri="https://reports.example/q3.pdf",
        mime_type="application/pdf",
        size=1234,
    )
    got = tool_result_of(
        result(EmbeddedResource(type="resource", resource=blob), link), limit=LIMIT
    )

    assert got.text == (
        "[binary resource file:///a.bin (application/zip), 4 bytes, not shown]\n"
        "[resource link report (Q3 report): https://reports.example/q3.pdf (application/pdf, "
        "1,234 bytes), not fetched]"
    )
    assert got.images == []


def test_audio_is_noted_and_structured_content_stands_in_for_no_content():
    audio = AudioContent(type="audio", data=b64(b"RIFF1234"), mime_type="audio/wav")
    assert tool_result_of(result(audio), limit=LIMIT).text == (
        "[audio (audio/wav), 8 bytes, not passed on]"
    )
    got = tool_result_of(CallToolResult(content=[], structured_content={"n": 1}), limit=LIMIT)
    assert got.text == '{"n": 1}'


def test_an_error_result_is_marked_and_the_text_is_scrubbed():
    got = tool_result_of(
        result(text("denied for token abc123"), is_error=True),
        limit=LIMIT,
        scrub=lambda s: s.replace("abc123", "[hidden]"),
    )
    assert got.is_error
    assert got.text == "denied for token [hidden]"


def test_an_image_whose_line_was_cut_off_is_not_kept():
    got = tool_result_of(result(text("y" * 50), image(b64(tiny_png()))), limit=40)

    assert got.images == []
    assert "[image" not in got.text


def test_for_agno_is_the_text_alone_or_agnos_tool_result_with_the_images():
    from agno.tools.function import ToolResult

    assert tool_result_of(result(text("plain")), limit=LIMIT).for_agno() == "plain"
    png = tiny_png()
    carried = tool_result_of(result(image(b64(png))), limit=LIMIT).for_agno()
    assert isinstance(carried, ToolResult)
    [img] = carried.images or []
    assert img.content == png
    assert img.mime_type == "image/png"
    assert img.id in carried.content
