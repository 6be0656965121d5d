"""Book files -> chapters: EPUB (built here with ebooklib), markdown and text, and the inputs that
must be refused. Expected chapters are written out by hand: a chapter's heading is its first paragraph."""

from __future__ import annotations

import pytest
from book_inputs import make_epub

from kokoro_tvm_ext.book.sources import Chapter, read_book
from kokoro_tvm_ext.errors import InvalidInputError


def test_epub_chapters_follow_the_table_of_contents(tmp_path):
    path = make_epub(
        tmp_path / "b.epub",
        [
            ("cover.xhtml", "<p>A Test Book, by Nobody.</p>"),
            (
                "one.xhtml",
                "<h1>The Start</h1><p>It was a <em>dark</em> night.</p><script>var x;</script><p>Rain fell.</p>",
            ),
            ("two.xhtml", "<h1>The End</h1><p>Morning came.</p>"),
            ("two-b.xhtml", "<p>Still the end.</p>"),  # not in the TOC: belongs to the chapter before it
        ],
        toc=[("The Start", "one.xhtml"), ("The End", "two.xhtml#top")],
    )
    book = read_book(path)
    assert book.title == "A Test Book"
    assert book.chapters == [
        Chapter("Front matter", ("A Test Book, by Nobody.",)),
        Chapter("The Start", ("The Start", "It was a dark night.", "Rain fell.")),
        Chapter("The End", ("The End", "Morning came.", "Still the end.")),
    ]


def test_epub_without_a_toc_has_a_chapter_per_document(tmp_path):
    path = make_epub(tmp_path / "b.epub", [("a.xhtml", "<h2>First</h2><p>One.</p>"), ("b.xhtml", "<p>Two.</p>")])
    assert read_book(path).chapters == [Chapter("First", ("First", "One.")), Chapter("Chapter 2", ("Two.",))]


def test_markdown_chapters_at_top_level_headings(tmp_path):
    path = tmp_path / "essay.md"
    path.write_text(
        "Before any heading.\n\n# One\n\nHello *world*, see [the site](http://example.com).\n\n"
        "## A section\n\nMore text\nover two lines.\n\n```\ncode is not read\n```\n\n# Two\n\n"
        "- first item\n- second item\n"
    )
    assert read_book(path).chapters == [
        Chapter("Front matter", ("Before any heading.",)),
        Chapter("One", ("One", "Hello world, see the site.", "A section", "More text over two lines.")),
        Chapter("Two", ("Two", "first item second item")),
    ]


def test_text_chapters_at_heading_lines(tmp_path):
    path = tmp_path / "story.txt"
    path.write_text(
        "THE STORY\n\nby Nobody\n\nCHAPTER I\n\nOnce upon a time.\nA second line.\n\n"
        "Another paragraph.\n\nChapter 2: The End\n\nThey lived.\n"
    )
    assert read_book(path).chapters == [
        Chapter("THE STORY", ("THE STORY", "by Nobody")),
        Chapter("CHAPTER I", ("CHAPTER I", "Once upon a time. A second line.", "Another paragraph.")),
        Chapter("Chapter 2: The End", ("Chapter 2: The End", "They lived.")),
    ]


def test_text_without_headings_is_one_chapter(tmp_path):
    path = tmp_path / "note.txt"
    path.write_text("Just a note.\n\nIt has two paragraphs, and no heading.\n")
    book = read_book(path)
    assert book.title == "note"
    assert book.chapters == [Chapter("note", ("Just a note.", "It has two paragraphs, and no heading."))]
    assert book.chapters[0].text == "Just a note.\n\nIt has two paragraphs, and no heading."


@pytest.mark.parametrize(
    "name, content, message",
    [
        ("missing.txt", None, "no such file"),
        ("book.pdf", b"%PDF-1.4", "unknown book format '.pdf'"),
        ("headings-only.md", b"# One\n\n   \n# Two\n", "no text to speak"),
        ("damaged.epub", b"not a zip", "not a readable EPUB"),
    ],
)
def test_bad_book_files_are_refused(tmp_path, name, content, message):
    path = tmp_path / name
    if content is not None:
        path.write_bytes(content)
    with pytest.raises(InvalidInputError, match=message):
        read_book(path)


def test_an_epub_with_no_text_is_refused(tmp_path):
    path = make_epub(
        tmp_path / "images.epub",
        [("a.xhtml", '<img src="x.png"/>'), ("b.xhtml", "<p> </p>")],
        toc=[("Pictures", "a.xhtml")],
    )
    with pytest.raises(InvalidInputError, match="no text to speak"):
        read_book(path)
