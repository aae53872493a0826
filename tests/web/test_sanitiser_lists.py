"""The two Markdown sanitisers keep the same things: nh3's allow-list on the server
(web/rendering.py, read from its `nh3.clean` call) and DOMPurify's in the browser, for a reply
while it streams (static/rollback/stream.js, read from its source). Tags, attributes by tag, URL
schemes and classes are compared, so that neither list can change alone."""

from __future__ import annotations

import ast
import inspect
import re
from pathlib import Path

import pytest
from pygments.token import STANDARD_TYPES

from web import rendering

ROOT = Path(__file__).resolve().parents[2]
STREAM_JS = (ROOT / "static" / "rollback" / "stream.js").read_text()


def server_list() -> dict[str, object]:
    """The keyword arguments of the `nh3.clean` call in web.rendering, evaluated there."""
    tree = ast.parse(inspect.getsource(rendering))
    (call,) = [
        node
        for node in ast.walk(tree)
        if isinstance(node, ast.Call) and ast.unparse(node.func) == "nh3.clean"
    ]
    return {
        keyword.arg: eval(  # noqa: S307 - the module's own constants
            compile(ast.Expression(keyword.value), "web/rendering.py", "eval"), vars(rendering)
        )
        for keyword in call.keywords
        if keyword.arg is not None
    }


SERVER = server_list()


def js_value(name: str) -> str:
    """The source of `var NAME = ...;` in stream.js (to its first `;` at the end of a line)."""
    found = re.search(rf"\bvar {name} = (.*?);\s*$", STREAM_JS, re.S | re.M)
    assert found, f"stream.js has no `var {name} = ...;`"
    return found.group(1)


def js_strings(source: str) -> list[str]:
    return re.findall(r'"([^"]*)"', source)


def js_regex(source: str) -> re.Pattern[str]:
    """A JavaScript regex literal (or a name bound to one) as Python's (same syntax here)."""
    source = source.strip()
    if re.fullmatch(r"[A-Z_]+", source):
        source = js_value(source)
    found = re.fullmatch(r"/(.*)/([a-z]*)", source)
    assert found, source
    return re.compile(found.group(1), re.I if "i" in found.group(2) else 0)


def js_object(source: str) -> dict[str, str]:
    """`{ KEY: value, ... }` (one entry a line or all on one line) as KEY -> value's source."""
    body = source.strip().removeprefix("{").removesuffix("}")
    entries = re.findall(r"([A-Z]+):\s*(\[[^\]]*\]|/(?:\\.|[^/\n])*/[a-z]*|[A-Z_]+)", body)
    assert entries, source
    return dict(entries)


BROWSER_TAGS = set(js_strings(js_value("TAGS")))
BROWSER_ATTR = set(js_strings(re.search(r"ALLOWED_ATTR: (\[[^\]]*\])", STREAM_JS).group(1)))
BROWSER_ATTRS = {tag.lower(): set(js_strings(v)) for tag, v in js_object(js_value("ATTRS")).items()}
BROWSER_CLASSES = {tag.lower(): js_regex(v) for tag, v in js_object(js_value("CLASSES")).items()}
BROWSER_URI = js_regex(re.search(r"ALLOWED_URI_REGEXP: (/.*/[a-z]*),", STREAM_JS).group(1))

# Classes neither side's Markdown writes, and that no list should keep.
STRANGERS = ["", "x", "align-justify", "codeblock-x", "delta", "hidden", "language-", "evil"]
PYGMENTS = {c for c in STANDARD_TYPES.values() if c}


def test_both_read_something():
    """The parsing found the lists (an empty list on both sides would compare equal)."""
    assert {"p", "a", "code", "table"} <= BROWSER_TAGS
    assert SERVER["tags"]
    assert BROWSER_CLASSES
    assert BROWSER_ATTRS


def test_the_same_tags():
    assert set(SERVER["tags"]) == BROWSER_TAGS


def test_the_same_attributes_on_each_tag():
    """nh3: `attributes`, and `class` where `allowed_classes` names the tag; DOMPurify:
    ALLOWED_ATTR narrowed by tag in its hook (ATTRS, and `class` where CLASSES names the tag)."""
    server: dict[str, set[str]] = {tag: set(names) for tag, names in SERVER["attributes"].items()}
    for tag in SERVER["allowed_classes"]:
        server.setdefault(tag, set()).add("class")
    browser = {tag: set(names) for tag, names in BROWSER_ATTRS.items()}
    for tag in BROWSER_CLASSES:
        browser.setdefault(tag, set()).add("class")
    assert server == browser
    assert set().union(*browser.values()) == BROWSER_ATTR  # the hook's cap is the same set
    # Both set the same on a link (nh3 by its arguments, DOMPurify in its second hook).
    assert SERVER["set_tag_attribute_values"] == {"a": {"target": "_blank"}}
    assert 'node.setAttribute("target", "_blank")' in STREAM_JS
    assert f'node.setAttribute("rel", "{SERVER["link_rel"]}")' in STREAM_JS


@pytest.mark.parametrize(
    "scheme",
    ["http", "https", "mailto", "javascript", "vbscript", "data", "file", "ftp", "tel", "blob"],
)
def test_the_same_url_schemes(scheme):
    url = f"{scheme}:something"
    assert (scheme in SERVER["url_schemes"]) == bool(BROWSER_URI.match(url)), url


def test_the_browser_keeps_every_scheme_the_server_does():
    assert all(BROWSER_URI.match(f"{scheme}:x") for scheme in SERVER["url_schemes"])


def test_relative_links_pass_both():
    """nh3 keeps a link without a scheme; so does DOMPurify's pattern."""
    for url in ("/chat/1/", "#top", "page.html", "?q=1"):
        assert BROWSER_URI.match(url), url


@pytest.mark.parametrize("tag", ["div", "th", "td"])
def test_the_same_classes(tag):
    server = set(SERVER["allowed_classes"][tag])
    kept = {c for c in server | set(STRANGERS) if BROWSER_CLASSES[tag].fullmatch(c)}
    assert kept == server


def test_a_span_keeps_the_same_classes_but_the_highlighters():
    """The browser does not highlight (Pygments' colours come with the server's rendering when
    the turn ends): its spans keep the server's classes but Pygments' ones."""
    server = set(SERVER["allowed_classes"]["span"])
    kept = {c for c in server | set(STRANGERS) if BROWSER_CLASSES["span"].fullmatch(c)}
    assert kept == server - PYGMENTS
    assert server - kept == PYGMENTS


@pytest.mark.parametrize(
    "language",
    ["python", "c++", "c#", "objective-c", "vb.net", "x" * 32, "x" * 33, "", "a b", "<b>", "é"],
)
def test_code_keeps_the_language_class_the_server_writes(language):
    """nh3 keeps any class on <code> (it takes no pattern), and the server's Markdown writes only
    `language-<name>` there, for a name LANGUAGE matches: the browser keeps exactly those."""
    assert SERVER["attributes"]["code"] == {"class"}
    assert "code" not in SERVER["allowed_classes"]
    written = bool(rendering.LANGUAGE.fullmatch(language))
    assert bool(BROWSER_CLASSES["code"].fullmatch(f"language-{language}")) == written
