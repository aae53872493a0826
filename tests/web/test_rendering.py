"""Markdown as the pages show it (web/rendering.py): highlighted code under a language label,
tables that keep their alignment, bare addresses linked to a new tab, and nothing active."""

from __future__ import annotations

from html.parser import HTMLParser

from tests.security.inspect_html import inspect
from web.rendering import code_language, render_markdown


class _Elements(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.elements: list[tuple[str, dict[str, str]]] = []
        self.code = ""
        self.in_code = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.elements.append((tag, {k: v or "" for k, v in attrs}))
        self.in_code = self.in_code or tag == "code"

    def handle_endtag(self, tag: str) -> None:
        self.in_code = self.in_code and tag != "code"

    def handle_data(self, data: str) -> None:
        if self.in_code:
            self.code += data


def code_text(html: str) -> str:
    """The text of the code blocks, as a reader (or the copy button) gets it."""
    parser = _Elements()
    parser.feed(html)
    return parser.code


def elements(html: str, tag: str) -> list[dict[str, str]]:
    parser = _Elements()
    parser.feed(html)
    return [attrs for name, attrs in parser.elements if name == tag]


def test_a_python_block_is_highlighted_with_classes_under_its_language():
    html = render_markdown("Look:\n\n```python\ndef f(x):\n    return 'hi'\n```\n")
    assert '<span class="codeblock-lang">python</span>' in html
    assert '<code class="language-python">' in html
    assert '<span class="k">def</span>' in html
    assert '<span class="nf">f</span>' in html
    assert "<span class=\"s1\">'hi'</span>" in html
    assert code_text(html) == "def f(x):\n    return 'hi'\n"  # what a copy gets
    assert "style=" not in html  # the Content Security Policy forbids style attributes


def test_an_unknown_language_is_labelled_but_plain_and_escaped():
    html = render_markdown("```nosuchlang\n<b>bold?</b> & more\n```")
    assert '<span class="codeblock-lang">nosuchlang</span>' in html
    assert '<code class="language-nosuchlang">&lt;b&gt;bold?&lt;/b&gt; &amp; more\n</code>' in html
    assert "<b>" not in html
    assert not elements(html, "span")[1:]


def test_a_block_without_a_language_has_no_label():
    html = render_markdown("```\nprint(1)\n```")
    assert "codeblock-lang" not in html
    assert "<pre><code>print(1)\n</code></pre>" in html


def test_script_in_a_fence_stays_text_whatever_the_language():
    for fence in ("```", "```html", "```javascript", "```python"):
        source = "<script>alert('pwn01x')</script>\n"
        html = render_markdown(f"{fence}\n{source}```")
        assert "<script" not in html, fence
        assert code_text(html) == source, fence
        report = inspect(html)
        assert not report.problems, fence
        assert "pwn01x" in report.shown, fence


def test_a_fence_language_with_markup_is_no_language():
    html = render_markdown('```"><img src=x onerror=alert(1)>\ncode\n```')
    assert "<img" not in html
    assert "codeblock-lang" not in html
    assert "onerror" not in html
    assert code_language('"><img src=x') == ""
    assert code_language("c++ {.numberLines}") == "c++"
    assert code_language("c#") == "c#"
    assert code_language("") == ""


def test_a_table_keeps_its_alignment_as_classes():
    html = render_markdown("| a | b | c | d |\n|:--|:-:|--:|---|\n| 1 | 2 | 3 | 4 |")
    heads = [cell.get("class") for cell in elements(html, "th")]
    cells = [cell.get("class") for cell in elements(html, "td")]
    assert heads == cells == ["align-left", "align-center", "align-right", None]
    assert "style=" not in html


def test_a_bare_address_is_a_link_to_a_new_tab():
    html = render_markdown("Docs at https://example.com/path?q=1 and [here](http://a.example/).")
    links = elements(html, "a")
    assert [a["href"] for a in links] == ["https://example.com/path?q=1", "http://a.example/"]
    for a in links:
        assert a["target"] == "_blank"
        assert {"noopener", "noreferrer"} <= set(a["rel"].split())


def test_file_names_in_prose_are_not_links():
    html = render_markdown("Edit main.py and README.md, then `run.sh`.")
    assert "<a" not in html


def test_a_quote_and_the_classes_users_cannot_write():
    assert "<blockquote>" in render_markdown("> a quote")
    # Raw HTML is text, so no class or element of the app's can be forged from a message.
    html = render_markdown('<div class="codeblock">x</div> <span class="k">y</span>')
    assert not elements(html, "div")
    assert not elements(html, "span")
