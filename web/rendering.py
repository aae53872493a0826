"""Untrusted text (user messages, model output) as safe HTML.

markdown-it-py renders CommonMark with raw HTML turned off (any HTML in the text is shown as
text) and refuses javascript:, vbscript: and data: links; nh3 (the Rust `ammonia` sanitiser) then
keeps only an allow-list of tags and attributes, as a second, independent guard.
"""

from __future__ import annotations

import nh3
from django.utils.safestring import SafeString, mark_safe
from markdown_it import MarkdownIt

_md = MarkdownIt("commonmark", {"html": False, "linkify": False, "breaks": True}).enable(
    ["table", "strikethrough"]
)

_TAGS = {
    "p", "br", "hr", "strong", "em", "del", "s", "code", "pre", "blockquote", "ul", "ol",
    "li", "a", "h1", "h2", "h3", "h4", "h5", "h6", "table", "thead", "tbody", "tr", "th", "td",
}  # fmt: skip
# No <img>: a picture from an arbitrary host in model output would tell that host who reads it.
_ATTRIBUTES = {"a": {"href", "title"}, "code": {"class"}}


def render_markdown(text: str) -> SafeString:
    html = _md.render(text or "")
    clean = nh3.clean(
        html,
        tags=_TAGS,
        attributes=_ATTRIBUTES,
        url_schemes={"http", "https", "mailto"},
        link_rel="noopener noreferrer nofollow",
        strip_comments=True,
    )
    return mark_safe(clean)  # noqa: S308 - sanitised by nh3 just above
