"""A book file -> its chapters: a title and the paragraphs to speak, each on one line.

``.epub``: one chapter per table-of-contents entry (read with ebooklib), spanning the
spine documents from that entry's document up to the next entry's; text before the
first entry is a "Front matter" chapter. Without a table of contents, each spine
document with text is a chapter. ``.md``: a chapter at each top-level ``#`` heading.
``.txt``: a chapter at each paragraph that is one short line looking like a heading
("Chapter 3", "PART TWO", "XII", ...), else the whole file is one chapter.

A chapter's heading is spoken as its own paragraph, first (an EPUB document's heading is in
its text already), so it never runs into the sentence after it. The text is split into
paragraphs once, here: units of work are runs of these paragraphs.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from html.parser import HTMLParser
from pathlib import Path

from kokoro_tvm_ext.support.errors import InvalidInputError, MissingAssetError

EXTENSIONS = (".epub", ".md", ".markdown", ".txt")
FRONT_MATTER = "Front matter"


@dataclass(frozen=True)
class Chapter:
    title: str
    paragraphs: tuple[str, ...]  # each on one line, single spaces; a spoken heading is the first

    @property
    def text(self) -> str:
        """The paragraphs separated by blank lines, as the speech pipeline reads paragraphs."""
        return "\n\n".join(self.paragraphs)


@dataclass(frozen=True)
class Book:
    title: str
    chapters: list[Chapter]


def read_book(path: str | Path) -> Book:
    """The book's title and chapters, each with some text; InvalidInputError if there are none."""
    path = Path(path).expanduser()
    suffix = path.suffix.lower()
    if suffix not in EXTENSIONS:
        raise InvalidInputError(
            f"{path}: unknown book format {suffix or '(no extension)'!r}; give one of {', '.join(EXTENSIONS)}"
        )
    if not path.is_file():
        raise InvalidInputError(f"{path}: no such file")
    title = path.stem
    if suffix == ".epub":
        title, chapters = _epub_chapters(path)
    else:
        try:
            text = path.read_text(encoding="utf-8-sig")
        except UnicodeDecodeError as err:
            raise InvalidInputError(f"{path}: not UTF-8 text ({err.reason} at byte {err.start})") from None
        chapters = (
            _markdown_chapters(text, path.stem) if suffix in (".md", ".markdown") else _text_chapters(text, path.stem)
        )
    chapters = [c for c in chapters if c.paragraphs]
    if not chapters:
        raise InvalidInputError(f"{path}: the book has no text to speak")
    return Book(title, chapters)


def paragraphs(text: str) -> list[str]:
    """Blank-line-separated paragraphs, each on one line with single spaces."""
    return [" ".join(p.split()) for p in _blocks(text)]


def _blocks(text: str) -> list[str]:
    """The blank-line-separated blocks of text, as written (their lines kept)."""
    return [p.strip() for p in re.split(r"\n[ \t\r\f\v]*\n", text) if p.strip()]


# -- plain text -------------------------------------------------------------------------
_HEADING_WORDS = re.compile(
    r"^(chapter|part|book|volume|section|prologue|epilogue|preface|foreword|introduction|afterword|appendix)\b",
    re.IGNORECASE,
)
_ROMAN = re.compile(r"^[IVXLCDM]+\.?$")


def _looks_like_heading(paragraph: str) -> bool:
    """One short line that reads as a heading: a heading word, a Roman numeral or all capitals."""
    if "\n" in paragraph.strip() or len(paragraph) > 60:
        return False
    line = paragraph.strip()
    if _HEADING_WORDS.match(line) or _ROMAN.match(line):
        return True
    letters = [c for c in line if c.isalpha()]
    return len(letters) >= 2 and all(c.isupper() for c in letters) and not line.endswith((".", ",", ";"))


def _chapter(title: str | None, body: list[str], untitled: str) -> list[Chapter]:
    """The chapter under a heading (spoken first) or none (``untitled`` names it): none without text."""
    return [Chapter(title or untitled, (title, *body) if title else tuple(body))] if body else []


def _text_chapters(text: str, stem: str) -> list[Chapter]:
    chapters, title, body = [], None, []
    for block in _blocks(text):
        if _looks_like_heading(block):
            chapters += _chapter(title, body, FRONT_MATTER)
            title, body = " ".join(block.split()), []
        else:
            body.append(" ".join(block.split()))
    return chapters + _chapter(title, body, stem)  # no heading at all: one chapter, named after the file


# -- markdown ----------------------------------------------------------------------------
_MD_HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
_MD_INLINE = [
    (re.compile(r"!\[[^\]]*\]\([^)]*\)"), ""),  # images
    (re.compile(r"\[([^\]]*)\]\([^)]*\)"), r"\1"),  # links -> their text
    (re.compile(r"`([^`]*)`"), r"\1"),
    (re.compile(r"(\*\*|__|\*|_)(?=\S)(.+?)(?<=\S)\1"), r"\2"),  # emphasis
    (re.compile(r"<[^>]+>"), ""),  # inline HTML tags
]
_MD_LINE_PREFIX = re.compile(r"^\s*(>\s?|[-*+]\s+|\d+[.)]\s+)+")


def _markdown_plain(line: str) -> str:
    line = _MD_LINE_PREFIX.sub("", line)
    for pattern, repl in _MD_INLINE:
        line = pattern.sub(repl, line)
    return line


def _markdown_chapters(text: str, stem: str) -> list[Chapter]:
    lines, in_code = [], False
    for line in text.splitlines():
        if line.lstrip().startswith(("```", "~~~")):
            in_code = not in_code  # code is not read aloud
            continue
        if not in_code:
            lines.append(line)
    levels = [len(m.group(1)) for m in map(_MD_HEADING.match, lines) if m]
    top = min(levels) if levels else None
    chapters, title, body = [], None, []
    for line in lines:
        m = _MD_HEADING.match(line)
        if m and len(m.group(1)) == top:
            chapters += _chapter(title, paragraphs("\n".join(body)), FRONT_MATTER)
            title, body = _markdown_plain(m.group(2)), []
        elif m:  # a lower heading is a paragraph of its own
            body += ["", _markdown_plain(m.group(2)), ""]
        elif re.fullmatch(r"\s*([-*_]\s*){3,}", line):  # a thematic break
            body.append("")
        else:
            body.append(_markdown_plain(line))
    return chapters + _chapter(title, paragraphs("\n".join(body)), stem)


# -- EPUB --------------------------------------------------------------------------------
_BLOCKS = {
    "p",
    "div",
    "br",
    "li",
    "h1",
    "h2",
    "h3",
    "h4",
    "h5",
    "h6",
    "blockquote",
    "section",
    "article",
    "tr",
    "dd",
    "dt",
    "pre",
    "hr",
    "figcaption",
    "header",
    "footer",
    "aside",
}
_SKIP = {"script", "style", "head", "title", "svg", "math"}


class _HtmlText(HTMLParser):
    """XHTML -> paragraphs: a break at every block element, nothing from scripts or styles."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []
        self.skipping = 0
        self.heading: str | None = None
        self._in_heading = False
        self._heading_parts: list[str] = []

    def handle_starttag(self, tag, attrs) -> None:
        if tag in _SKIP:
            self.skipping += 1
        elif tag in _BLOCKS:
            self.parts.append("\n\n")
        if tag in ("h1", "h2") and self.heading is None:
            self._in_heading = True

    def handle_endtag(self, tag) -> None:
        if tag in _SKIP:
            self.skipping = max(0, self.skipping - 1)
        elif tag in _BLOCKS:
            self.parts.append("\n\n")
        if tag in ("h1", "h2") and self._in_heading:
            self._in_heading = False
            self.heading = " ".join("".join(self._heading_parts).split()) or None

    def handle_startendtag(self, tag, attrs) -> None:
        if tag in _BLOCKS:
            self.parts.append("\n\n")

    def handle_data(self, data) -> None:
        if not self.skipping:
            self.parts.append(data)
            if self._in_heading:
                self._heading_parts.append(data)


def html_text(markup: bytes | str) -> tuple[list[str], str | None]:
    """(the paragraphs of the document's text, its first h1/h2 heading or None)."""
    parser = _HtmlText()
    parser.feed(markup.decode("utf-8", errors="replace") if isinstance(markup, bytes) else markup)
    parser.close()
    return paragraphs("".join(parser.parts)), parser.heading


def _toc_entries(toc) -> list[tuple[str, str]]:
    """The table of contents in reading order as (title, document href), nested entries included.
    ebooklib gives a list of Links and (Section, children) pairs; a lone Link stands for a list of one."""
    if not isinstance(toc, (tuple, list)):
        toc = [toc]
    out = []
    for entry in toc:
        if isinstance(entry, (tuple, list)) and len(entry) == 2 and not isinstance(entry[0], (tuple, list)):
            section, children = entry
            if getattr(section, "href", None):
                out.append((section.title, section.href))
            out += _toc_entries(children)
        elif isinstance(entry, (tuple, list)):
            out += _toc_entries(list(entry))
        elif getattr(entry, "href", None):
            out.append((entry.title, entry.href))
    return out


def _epub_chapters(path: Path) -> tuple[str, list[Chapter]]:
    try:
        import ebooklib
        from ebooklib import epub
    except ImportError:
        raise MissingAssetError("reading EPUB needs ebooklib: pip install 'kokoro-tvm-ext[book]'") from None
    try:
        book = epub.read_epub(str(path), options={"ignore_ncx": False})
    except Exception as err:  # ebooklib raises zipfile, KeyError, lxml and its own errors for damaged files
        raise InvalidInputError(f"{path}: not a readable EPUB ({type(err).__name__}: {err})") from None
    titles = book.get_metadata("DC", "title")
    book_title = " ".join(str(titles[0][0]).split()) if titles and titles[0][0] else path.stem
    spine = []
    for idref, _ in book.spine:
        item = book.get_item_with_id(idref)
        # The EPUB 3 navigation document is the table of contents itself, not text to read.
        if item is not None and item.get_type() == ebooklib.ITEM_DOCUMENT and not isinstance(item, epub.EpubNav):
            spine.append(item)
    names = [item.get_name() for item in spine]
    texts = [html_text(item.get_content()) for item in spine]
    titles_at: dict[int, list[str]] = {}  # spine index -> the titles of the entries that start there
    for title, href in _toc_entries(book.toc):
        name = href.split("#", 1)[0]
        title = " ".join(str(title or "").split())
        if name in names and title not in titles_at.setdefault(names.index(name), []):
            titles_at[names.index(name)].append(title)
    starts = sorted(titles_at)
    if not starts:  # no usable table of contents: one chapter per document
        return book_title, [
            Chapter(heading or f"Chapter {i + 1}", tuple(paras)) for i, (paras, heading) in enumerate(texts)
        ]
    chapters = []
    if starts[0] > 0:
        chapters.append(Chapter(FRONT_MATTER, tuple(p for paras, _ in texts[: starts[0]] for p in paras)))
    for k, first in enumerate(starts):
        end = starts[k + 1] if k + 1 < len(starts) else len(texts)
        # A part and its first chapter in one document: "Part One: Chapter 1".
        title = ": ".join(t for t in titles_at[first] if t) or f"Chapter {k + 1}"
        chapters.append(Chapter(title, tuple(p for paras, _ in texts[first:end] for p in paras)))
    return book_title, chapters
