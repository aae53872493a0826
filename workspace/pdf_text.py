"""A PDF's text, so that the agent can read a PDF of the workspace (read_file): extracted with
pypdf, a maintained pure-Python library, page by page.

Bounded, since a PDF is anyone's upload: at most MAX_PAGES pages are read and the text stops at
the caller's bound; a PDF that pypdf cannot parse, or that needs a password, is an InvalidInput
that says so (the bytes stay as they are, downloadable). The extraction runs where the caller
runs (a turn's tool, within its deadline: agents.tool_deadline), never in a web request.
"""

from __future__ import annotations

import io
import logging
from dataclasses import dataclass

from core.errors import InvalidInput

MAGIC = b"%PDF-"
# The pages read of one PDF: a long report's first hundred pages are more than a read shows.
MAX_PAGES = 100


class PdfUnreadable(InvalidInput):
    """A PDF whose text cannot be had: broken, or locked with a password."""


@dataclass(frozen=True)
class PdfText:
    text: str
    pages: int  # the PDF's pages
    read: int  # the pages whose text is in `text`
    cut: bool  # the text stopped at the caller's bound, or at MAX_PAGES


def is_pdf(content: bytes) -> bool:
    """Whether the bytes are a PDF (its header within the first 1,024 bytes, as readers allow)."""
    return MAGIC in content[:1024]


def pdf_text(path: str, content: bytes, *, chars: int) -> PdfText:
    """The text of the PDF's pages, in order, up to `chars` characters and MAX_PAGES pages."""
    from pypdf import PdfReader
    from pypdf.errors import PyPdfError

    # pypdf warns through logging about every oddity of a PDF it still reads.
    logging.getLogger("pypdf").setLevel(logging.ERROR)
    try:
        reader = PdfReader(io.BytesIO(content))
        if reader.is_encrypted and not reader.decrypt(""):
            raise PdfUnreadable(
                f"'{path}' is a PDF locked with a password: its text cannot be read."
            )
        pages = len(reader.pages)
        parts: list[str] = []
        total, read = 0, 0
        for page in reader.pages[:MAX_PAGES]:
            text = (page.extract_text() or "").strip()
            read += 1
            if text:
                parts.append(text)
                total += len(text) + 2
            if total >= chars:
                break
    except PdfUnreadable:
        raise
    except (PyPdfError, Exception) as exc:  # a broken PDF may fail pypdf anywhere
        raise PdfUnreadable(
            f"'{path}' is a PDF whose text could not be read ({type(exc).__name__}): it can "
            "still be downloaded."
        ) from exc
    joined = "\n\n".join(parts)
    cut = len(joined) > chars or read < pages
    return PdfText(joined[:chars], pages, read, cut)
