"""Markdown into Telegram's text and entities, and the split at 4,096 UTF-16 code units."""

from __future__ import annotations

from integrations.telegram.format import EMPTY_REPLY, MAX_MESSAGE, render, split_plain, utf16_len


def entities(piece) -> list[tuple[str, str]]:
    """(type, the text it covers) of each entity of a piece, offsets read in UTF-16 units."""
    raw = piece.text.encode("utf-16-le")
    return [
        (e.type, raw[2 * e.offset : 2 * (e.offset + e.length)].decode("utf-16-le"))
        for e in piece.entities
    ]


def test_bold_code_and_links_become_entities_without_markup():
    [piece] = render("Hello **world**, run `ls -l` or see [the docs](https://example.com/x).")
    assert piece.text == "Hello world, run ls -l or see the docs."
    assert entities(piece) == [("bold", "world"), ("code", "ls -l"), ("text_link", "the docs")]
    assert piece.entities[2].url == "https://example.com/x"


def test_lists_and_code_blocks_keep_their_lines_and_language():
    [piece] = render("Steps:\n\n- one\n- two\n\n```python\nprint('hi')\n```")
    assert "one\n" in piece.text
    assert "two" in piece.text
    assert ("pre", "print('hi')") in entities(piece)
    assert [e.language for e in piece.entities if e.type == "pre"] == ["python"]


def test_links_with_unsafe_schemes_lose_their_url_and_keep_their_text():
    [piece] = render(
        "[a](javascript:alert(1)) [b](file:///etc/passwd) [c](data:text/html,x) "
        "[d](tg://resolve?domain=rollback) [e](http://ok.example)"
    )
    assert piece.text == "a b c d e"
    assert [(e.type, e.url) for e in piece.entities] == [
        ("text_link", "tg://resolve?domain=rollback"),
        ("text_link", "http://ok.example"),
    ]


def test_an_empty_reply_is_a_placeholder_and_blank_streamed_text_nothing():
    assert [p.text for p in render("")] == [EMPTY_REPLY]
    assert [p.text for p in render("   \n")] == [EMPTY_REPLY]
    assert split_plain("  \n ") == []


def test_a_long_reply_with_emoji_splits_in_pieces_of_at_most_4096_utf16_units():
    line = "Emoji 😀 count twice in UTF-16, **bold** too.\n"
    reply = line * (10_000 // len(line) + 1)
    assert len(reply) > 10_000
    pieces = render(reply)
    assert len(pieces) >= 3
    assert all(utf16_len(p.text) <= MAX_MESSAGE for p in pieces)
    assert all(p.text.endswith("\n") or p is pieces[-1] for p in pieces)  # split at newlines
    for piece in pieces:
        assert all(e.offset + e.length <= utf16_len(piece.text) for e in piece.entities)
        assert all(covered == "bold" for kind, covered in entities(piece))
    text = "".join(p.text for p in pieces)
    assert text.count("😀") == reply.count("😀")


def test_a_code_block_across_a_split_is_code_in_both_messages():
    code = "\n".join(f"x_{i} = {i}  # a line of code" for i in range(200))
    pieces = render(f"Before.\n\n```python\n{code}\n```\n\nAfter.")
    assert len(pieces) == 2
    for piece in pieces:
        pre = [covered for kind, covered in entities(piece) if kind == "pre"]
        assert len(pre) == 1
        assert "x_" in pre[0]
    assert "x_0 = 0" in pieces[0].text
    assert "x_199 = 199" in pieces[1].text


def test_streamed_text_is_plain_and_split_by_the_same_rule():
    text = "**not bold yet** " + "a" * 5000
    pieces = split_plain(text)
    assert [p.entities for p in pieces] == [(), ()]
    assert pieces[0].text.startswith("**not bold yet**")
    assert "".join(p.text for p in pieces) == text
    assert all(utf16_len(p.text) <= MAX_MESSAGE for p in pieces)


def test_a_link_whose_address_does_not_parse_keeps_its_text_only():
    [piece] = render("see [this](http://[broken) and [that](https://example.com)")
    assert "this" in piece.text
    assert [e.url for e in piece.entities if e.url] == ["https://example.com"]
