"""Untrusted text (user messages, model output) as safe HTML.

markdown-it-py renders CommonMark with raw HTML turned off (any HTML in the text is shown as
text) and refuses javascript:, vbscript: and data: links; nh3 (the Rust `ammonia` sanitiser) then
keeps only an allow-list of tags, attributes and classes, as a second, independent guard.

On top of plain CommonMark: tables (alignment as `align-*` classes, since the Content Security
Policy forbids style attributes), strikethrough, bare http(s) addresses linked, links opening in
a new tab, and fenced code highlighted by Pygments (CSS classes, styled in app.css) under a
language label. static/rollback/stream.js renders a reply the same way while it streams (without
the colours, which arrive with the server's rendering when the turn ends).
"""

from __future__ import annotations

import re
from functools import lru_cache
from html import escape
from typing import Any

import nh3
from django.core.exceptions import ImproperlyConfigured
from django.utils.safestring import SafeString, mark_safe
from markdown_it import MarkdownIt
from markdown_it.token import Token
from pygments import highlight
from pygments.formatters import HtmlFormatter
from pygments.lexers import get_lexer_by_name
from pygments.token import STANDARD_TYPES
from pygments.util import ClassNotFound

# A fence's language as shown and as a class: a name, never markup (`c++`, `c#`, `objective-c`,
# `vb.net`). Anything else is no language at all.
LANGUAGE = re.compile(r"[A-Za-z0-9_+#.-]{1,32}")
# Past this size a block is shown plain: highlighting is for reading, and some lexers are slow
# on long input.
HIGHLIGHT_LIMIT = 20_000

_md = MarkdownIt("commonmark", {"html": False, "linkify": True, "breaks": True}).enable(
    ["table", "strikethrough", "linkify"]
)
if _md.linkify is None:
    raise ImproperlyConfigured("linkify-it-py is a dependency: bare addresses become links")
# Only addresses with their scheme (https://..., mailto:...) become links: "main.py" or
# "README.md" in prose are file names, not sites in Paraguay or Moldova.
_md.linkify.set({"fuzzy_link": False, "fuzzy_email": False})
_formatter = HtmlFormatter(nowrap=True)


def code_language(info: str) -> str:
    """The language named by a fence's info string, or "" when it names none we can show."""
    words = info.split(maxsplit=1)
    if not words or not LANGUAGE.fullmatch(words[0]):
        return ""
    return words[0]


def highlighted(code: str, language: str) -> str | None:
    """`code` as Pygments' classed spans, or None for an unknown language or a huge block."""
    if not language or len(code) > HIGHLIGHT_LIMIT:
        return None
    try:
        lexer = get_lexer_by_name(language, stripnl=False, ensurenl=False)
    except ClassNotFound:
        return None
    html: str = highlight(code, lexer, _formatter)  # Pygments is untyped
    return html


def _code_block(code: str, language: str) -> str:
    head = '<div class="codeblock-head">'
    if language:
        head += f'<span class="codeblock-lang">{escape(language)}</span>'
    head += "</div>"
    body = highlighted(code, language)
    lang_class = f' class="language-{escape(language)}"' if language else ""
    inner = body if body is not None else escape(code)
    return f'<div class="codeblock">{head}<pre><code{lang_class}>{inner}</code></pre></div>\n'


def _fence(renderer: Any, tokens: list[Token], idx: int, options: Any, env: Any) -> str:
    token = tokens[idx]
    return _code_block(token.content, code_language(token.info))


def _code_block_rule(renderer: Any, tokens: list[Token], idx: int, options: Any, env: Any) -> str:
    return _code_block(tokens[idx].content, "")


_ALIGN = re.compile(r"text-align:(left|center|right)")


def _alignment_classes(state: Any) -> None:
    """Table cells' alignment as a class: markdown-it writes it as a style attribute."""
    for token in state.tokens:
        if token.type in ("th_open", "td_open") and token.attrs.get("style"):
            found = _ALIGN.fullmatch(str(token.attrs.pop("style")))
            if found:
                token.attrs["class"] = f"align-{found.group(1)}"


_md.add_render_rule("fence", _fence)
_md.add_render_rule("code_block", _code_block_rule)
_md.core.ruler.push("alignment_classes", _alignment_classes)

_TAGS = {
    "p", "br", "hr", "strong", "em", "del", "s", "code", "pre", "blockquote", "ul", "ol",
    "li", "a", "h1", "h2", "h3", "h4", "h5", "h6", "table", "thead", "tbody", "tr", "th", "td",
    "div", "span",
}  # fmt: skip
# No <img>: a picture from an arbitrary host in model output would tell that host who reads it.
_ATTRIBUTES = {"a": {"href", "title"}, "code": {"class"}}
_ALIGN_CLASSES = {"align-left", "align-center", "align-right"}
_CLASSES = {
    "div": {"codeblock", "codeblock-head"},
    "span": {"codeblock-lang"} | {c for c in STANDARD_TYPES.values() if c},
    "th": _ALIGN_CLASSES,
    "td": _ALIGN_CLASSES,
}


@lru_cache(maxsize=256)
def _render(text: str) -> str:
    return nh3.clean(
        _md.render(text),
        tags=_TAGS,
        attributes=_ATTRIBUTES,
        allowed_classes=_CLASSES,
        url_schemes={"http", "https", "mailto"},
        link_rel="noopener noreferrer nofollow",
        # Links in a message open in a new tab: following one never leaves the chat.
        set_tag_attribute_values={"a": {"target": "_blank"}},
        strip_comments=True,
    )


def render_markdown(text: str) -> SafeString:
    """A page shows the same messages again and again (each refresh, each live update), so the
    rendering of recent texts is kept."""
    return mark_safe(_render(text or ""))  # noqa: S308 - sanitised by nh3 in _render
