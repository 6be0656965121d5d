"""Inputs the book tests share: a short two-chapter book, CLI arguments, EPUBs built with ebooklib."""

from __future__ import annotations

SPEED = "10"
BOOK_MD = """# The Start

Hello there. This is the first chapter, and it is short.

A second paragraph follows the first one.

# The End

The second chapter is short; it has two paragraphs.

Then the book is over.
"""


def book_args(book, output, artifact, voice_file, *extra) -> list[str]:
    return [
        "book",
        str(book),
        "-o",
        str(output),
        "--artifact",
        str(artifact),
        "--voice",
        str(voice_file),
        "--lang",
        "a",
        "--speed",
        SPEED,
        "-q",
        *extra,
    ]


def make_epub(path, documents, toc=None, title="A Test Book"):
    """``documents``: (file name, xhtml body); ``toc``: (title, href) entries or None for none."""
    from ebooklib import epub

    book = epub.EpubBook()
    book.set_identifier("test-book")
    book.set_title(title)
    book.set_language("en")
    items = []
    for name, body in documents:
        item = epub.EpubHtml(title=name, file_name=name, content=f"<html><body>{body}</body></html>")
        book.add_item(item)
        items.append(item)
    book.toc = [epub.Link(href, t, href) for t, href in toc or []]
    book.add_item(epub.EpubNcx())
    book.add_item(epub.EpubNav())
    book.spine = ["nav", *items]
    epub.write_epub(str(path), book)
    return path
