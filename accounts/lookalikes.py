"""Usernames that look like other usernames (Unicode TR39, "Unicode Security Mechanisms").

Two checks, on data from `confusable_homoglyphs` (Unicode's Scripts.txt and confusables.txt,
shipped in the package, read offline):

- `mixes_scripts`: letters of more than one script, such as a Cyrillic "а" among Latin letters.
  Digits and punctuation belong to no script; Japanese, Chinese and Korean writing may combine
  Han with its companion scripts, as TR39's "highly restrictive" level allows.
- `skeleton`: TR39's skeleton, what a string looks like: each character replaced by the
  prototype it is confusable with ("а" and "a" both become "a", "0" becomes "O", "1" and "I"
  become "l"). Two usernames that look alike have the same skeleton. Usernames are unique
  whatever their case, so skeletons are compared case-folded.
"""  # noqa: RUF002 - the Cyrillic letter is the example

from __future__ import annotations

import functools
import unicodedata

from confusable_homoglyphs import categories, confusables

# Scripts that do not count ("Common": digits, punctuation; "Inherited": combining marks).
_NO_SCRIPT = frozenset({"COMMON", "INHERITED"})
# Combinations TR39's "highly restrictive" level allows.
_ALLOWED_MIXES = (
    frozenset({"LATIN", "HAN", "HIRAGANA", "KATAKANA"}),
    frozenset({"LATIN", "HAN", "BOPOMOFO"}),
    frozenset({"LATIN", "HAN", "HANGUL"}),
)


def _scripts(value: str) -> set[str]:
    return set(categories.unique_aliases(value)) - _NO_SCRIPT


def mixes_scripts(value: str) -> bool:
    scripts = _scripts(value)
    return len(scripts) > 1 and not any(scripts <= allowed for allowed in _ALLOWED_MIXES)


def scripts_of(value: str) -> str:
    """The scripts of `value`'s letters, in words: "Cyrillic and Latin"."""
    names = sorted(script.replace("_", " ").title() for script in _scripts(value))
    return " and ".join([", ".join(names[:-1]), names[-1]]) if len(names) > 1 else "".join(names)


@functools.cache
def _prototypes() -> dict[str, str]:
    """Each confusable character and the string it reads as.

    confusables.txt maps each confusable character (a source) to its prototype; the package
    stores every such pair in both directions, so the direction is found again: a prototype is
    a string of several characters, or a character that several sources map to (a source maps
    to one prototype only). In a pair of two characters that are each other's only look-alike,
    either may be the prototype: both read as the smaller one, which keeps skeletons equal.
    """
    pairs: dict[str, list[str]] = {}
    for char, entries in confusables.confusables_data.items():
        char = char.replace("\u200e", "")  # the package keeps the text direction marks
        pairs[char] = [entry["c"].replace("\u200e", "") for entry in entries]
    table: dict[str, str] = {}
    for char, others in pairs.items():
        if len(char) != 1 or len(others) != 1 or others[0] == char:
            continue  # a prototype (or a mark the package mangled)
        other = others[0]
        if len(other) > 1 or len(pairs.get(other, ())) > 1:
            table[char] = other
        else:
            table[char] = min(char, other)
    # A prototype's own characters read as what their pairs read as.
    return {char: "".join(table.get(c, c) for c in proto) for char, proto in table.items()}


@functools.lru_cache(maxsize=65536)
def skeleton(value: str) -> str:
    """TR39's skeleton of `value` (NFD, prototypes, NFD), case-folded."""
    table = _prototypes()
    decomposed = unicodedata.normalize("NFD", value)
    mapped = "".join(table.get(char, char) for char in decomposed)
    return unicodedata.normalize("NFD", mapped).casefold()
