"""Finds what in an HTML document could run script, and which payload markers it shows as
plain data. Python's own html.parser, so no new dependency; it unescapes character references in
text and attribute values as a browser does, so `&#106;avascript:` is seen as `javascript:`."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from html.parser import HTMLParser

MARKER = re.compile(r"pwn\d\dx")

# Never part of the app's pages, whoever wrote the text.
FORBIDDEN_TAGS = {
    "iframe", "frame", "frameset", "object", "embed", "applet", "base", "portal", "math",
    "template", "isindex", "xml", "import",
}  # fmt: skip
URL_ATTRIBUTES = {
    "href", "src", "action", "formaction", "xlink:href", "data", "poster", "background",
    "ping", "lowsrc", "dynsrc", "cite", "longdesc", "manifest", "codebase", "archive", "srcset",
    "icon", "profile", "usemap", "ws-connect", "sse-connect",
}  # fmt: skip
BAD_SCHEMES = ("javascript:", "vbscript:", "data:", "livescript:", "mocha:")
BAD_STYLE = re.compile(
    r"expression\s*\(|javascript:|vbscript:|url\s*\(|@import|behavior\s*:|binding"
)
# Attributes whose value is only ever shown as text (or a plain link): user text may be here.
# `data-confirm` is the question app.js passes to window.confirm (plain text); `data-copy` is
# the text copy.js writes to the clipboard (plain text).
TEXT_ATTRIBUTES = {
    "title", "value", "placeholder", "alt", "aria-label", "hx-confirm", "data-confirm", "href",
    "data-copy",
}  # fmt: skip
VOID = {
    "area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "param",
    "source", "track", "wbr",
}  # fmt: skip
# The app's own script files, and the admin's.
OWN_SCRIPT = re.compile(r"^/(static/|admin/jsi18n/$)")
# The app has no inline handlers (the Content-Security-Policy would block them).
OWN_HANDLERS: dict[str, re.Pattern[str]] = {}
# The app's favicon is the empty `data:,` (no request at all).
OWN_DATA_URLS = {("link", "href", "data:,")}


@dataclass
class Report:
    problems: list[str] = field(default_factory=list)
    shown: set[str] = field(default_factory=set)  # markers seen as text or in a text attribute
    texts: dict[str, list[str]] = field(default_factory=dict)  # data-testid -> its text


class Inspector(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.report = Report()
        self.raw_text: str | None = None  # the content of the open <script> or <style>
        self.raw_tag = ""
        self.open: list[tuple[str, str | None, list[str]]] = []  # tag, data-testid, its text

    # Elements.

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self._element(tag, attrs)
        if tag in ("script", "style"):
            self.raw_tag, self.raw_text = tag, ""
            if tag == "script" and not OWN_SCRIPT.match(dict(attrs).get("src") or ""):
                self._problem(f"<script> that is not one of the app's files: {attrs}")
        if tag not in VOID:
            self.open.append((tag, dict(attrs).get("data-testid"), []))

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self._element(tag, attrs)

    def handle_endtag(self, tag: str) -> None:
        if tag == self.raw_tag and self.raw_text is not None:
            if self.raw_text.strip() and self.raw_tag == "script":
                self._problem(f"inline script: {self.raw_text[:120]!r}")
            if MARKER.search(self.raw_text) or BAD_STYLE.search(self.raw_text.lower()):
                self._problem(f"user text in <{tag}>: {self.raw_text[:120]!r}")
            self.raw_text, self.raw_tag = None, ""
        for i in range(len(self.open) - 1, -1, -1):
            if self.open[i][0] == tag:
                for _, testid, text in self.open[i:]:
                    if testid:
                        self.report.texts.setdefault(testid, []).append("".join(text))
                del self.open[i:]
                break

    def handle_data(self, data: str) -> None:
        if self.raw_text is not None:
            self.raw_text += data
            return
        self.report.shown.update(MARKER.findall(data))
        for _, testid, text in self.open:
            if testid:
                text.append(data)

    def handle_comment(self, data: str) -> None:
        if MARKER.search(data):
            self._problem(f"user text in a comment: {data[:120]!r}")

    def handle_pi(self, data: str) -> None:
        self._problem(f"processing instruction: {data[:120]!r}")

    def unknown_decl(self, data: str) -> None:
        self._problem(f"declaration: {data[:120]!r}")

    # Checks.

    def _element(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if MARKER.search(tag):
            self._problem(f"user text as a tag: <{tag}>")
        if tag in FORBIDDEN_TAGS:
            self._problem(f"<{tag}> {attrs}")
        if tag == "meta" and (dict(attrs).get("http-equiv") or "").lower() == "refresh":
            self._problem(f"<meta http-equiv=refresh> {attrs}")
        for name, value in attrs:
            self._attribute(tag, name, value or "")

    def _attribute(self, tag: str, name: str, value: str) -> None:
        where = f"<{tag} {name}={value[:120]!r}>"
        if MARKER.search(name):
            self._problem(f"user text as an attribute name: {where}")
        if name.startswith("on"):
            own = OWN_HANDLERS.get(name)
            if own is None or not own.match(value):
                self._problem(f"event handler: {where}")
            return
        if name == "srcdoc":
            self._problem(f"srcdoc: {where}")
        if name in URL_ATTRIBUTES:
            # Browsers ignore whitespace and control characters around and inside a scheme.
            squeezed = re.sub(r"[\x00-\x20]", "", value).lower()
            if squeezed.startswith(BAD_SCHEMES) and (tag, name, value) not in OWN_DATA_URLS:
                self._problem(f"script or data address: {where}")
        if name == "style" and BAD_STYLE.search(value.lower()):
            self._problem(f"active style: {where}")
        markers = MARKER.findall(value)
        if markers:
            if name not in TEXT_ATTRIBUTES:
                self._problem(f"user text in an active attribute: {where}")
            elif name == "href" and not re.match(r"^(https?://|mailto:|/|\?|#)", value):
                self._problem(f"user text as a link address: {where}")
            else:
                self.report.shown.update(markers)

    def _problem(self, text: str) -> None:
        self.report.problems.append(text)


def inspect(html: str) -> Report:
    inspector = Inspector()
    inspector.feed(html)
    inspector.close()
    return inspector.report


class _FormReader(HTMLParser):
    """What a browser would submit from the form with id `form_id`, untouched."""

    def __init__(self, form_id: str) -> None:
        super().__init__(convert_charrefs=True)
        self.form_id = form_id
        self.inside = False
        self.data: dict[str, str] = {}
        self.textarea: str | None = None
        self.select: str | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = {k: v or "" for k, v in attrs}
        if tag == "form":
            self.inside = a.get("id") == self.form_id
        if not self.inside or "name" not in a:
            if tag == "option" and self.select and "selected" in a:
                self.data[self.select] = a.get("value", "")
            return
        if tag == "input":
            kind = a.get("type", "text")
            if kind in ("checkbox", "radio") and "checked" not in a:
                return
            if kind not in ("submit", "button", "file"):
                self.data[a["name"]] = a.get("value", "on" if kind == "checkbox" else "")
        elif tag == "textarea":
            self.textarea = a["name"]
            self.data[self.textarea] = ""
        elif tag == "select":
            self.select = a["name"]
            self.data.setdefault(self.select, "")

    def handle_endtag(self, tag: str) -> None:
        if tag == "form":
            self.inside = False
        elif tag == "textarea":
            self.textarea = None
        elif tag == "select":
            self.select = None

    def handle_data(self, data: str) -> None:
        if self.textarea is not None:
            # A browser drops one newline right after <textarea>.
            text = self.data[self.textarea] + data
            self.data[self.textarea] = text[1:] if text.startswith("\n") else text


def form_data(page: str, form_id: str) -> dict[str, str]:
    reader = _FormReader(form_id)
    reader.feed(page)
    reader.close()
    assert reader.data, f"no form {form_id!r} on the page"
    return reader.data
