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

An EPUB is a zip, and a zip can hold far more than its size on disk (one entry of zeros compressed
1000:1). Before any of it is read its zip directory is checked against ``EpubLimits`` (the files'
size in all, their number, each large file's compression ratio, the compression methods); ebooklib
then reads each file in bounded steps, at most to the size the directory gives it; and what is
parsed as XML or HTML (the package, the tables of contents, the chapters: up to ~30 times its size
in memory) is counted against a smaller budget before it is parsed.
"""

from __future__ import annotations

import codecs
import os
import posixpath
import re
import zipfile
from dataclasses import dataclass
from html.parser import HTMLParser
from pathlib import Path

from kokoro_tvm_ext.speech.markup import markup_tags
from kokoro_tvm_ext.support.errors import InvalidInputError, MissingAssetError
from kokoro_tvm_ext.support.sizes import human_size

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


@dataclass(frozen=True)
class EpubLimits:
    """What an EPUB may hold, each with the flag of ``kokoro-tvm book`` that raises it. A novel is ~1 MB of
    XHTML; illustrations bring a large book to ~100 MB; a book of 16 MiB of XHTML speaks for about a week."""

    max_bytes: int = 256 << 20  # the files uncompressed, in all, and the file itself (--max-book-bytes)
    max_entries: int = 10_000  # files in the zip (--max-book-entries)
    max_ratio: float = 100.0  # uncompressed / compressed size of a file over RATIO_FROM bytes (--max-book-ratio)
    max_text_bytes: int = 16 << 20  # what is parsed as XML or HTML, in all (--max-book-text-bytes)


# Small files are left out of the ratio check: whatever their ratio they cannot add up to much (the
# total is checked), and a short file of repeated characters compresses well.
RATIO_FROM = 1 << 20


def read_book(path: str | Path, limits: EpubLimits = EpubLimits()) -> Book:
    """The book's title and chapters, each with some text; InvalidInputError if there are none (or, for an
    EPUB, if it exceeds ``limits``)."""
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
        title, chapters = _epub_chapters(path, limits)
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
    """A line of markdown as plain text; pause, voice and rate tags kept as written (``[voice:am_adam]`` is no
    emphasis)."""
    line = _MD_LINE_PREFIX.sub("", line)
    out, end = [], 0
    for start, stop, written in markup_tags(line):
        if written == " ":  # a tag (an override's written words are the words themselves)
            out += [_markdown_inline(line[end:start]), line[start:stop]]
            end = stop
    return "".join(out) + _markdown_inline(line[end:])


def _markdown_inline(text: str) -> str:
    for pattern, repl in _MD_INLINE:
        text = pattern.sub(repl, text)
    return text


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
    parser.feed(_decoded(markup) if isinstance(markup, bytes) else markup)
    parser.close()
    return paragraphs("".join(parser.parts)), parser.heading


_BOMS = ((codecs.BOM_UTF8, "utf-8-sig"), (codecs.BOM_UTF16_LE, "utf-16"), (codecs.BOM_UTF16_BE, "utf-16"))
_XML_ENCODING = re.compile(rb"""<\?xml[^>]*?encoding\s*=\s*["']([A-Za-z0-9._-]+)["']""")


def _decoded(markup: bytes) -> str:
    """A document's bytes as text: by its byte-order mark, else its XML declaration, else UTF-8 (which EPUB
    requires, with UTF-16); what does not decode is replaced."""
    for bom, codec in _BOMS:
        if markup.startswith(bom):
            return markup.decode(codec, errors="replace")
    declared = _XML_ENCODING.match(markup)
    try:
        return markup.decode(declared.group(1).decode() if declared else "utf-8", errors="replace")
    except LookupError:  # an encoding Python does not know
        return markup.decode("utf-8", errors="replace")


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


class _Limits:
    """``EpubLimits`` applied to one EPUB: each refusal one line naming the limit and its flag."""

    def __init__(self, path: Path, limits: EpubLimits):
        self.path, self.limits = path, limits
        self.text_left = limits.max_text_bytes

    def refuse(self, problem: str, flag: str) -> InvalidInputError:
        return InvalidInputError(
            f"{self.path}: {problem}; if the book is genuine, raise the limit with {flag} (kokoro-tvm book --help)"
        )

    def check_zip(self, file) -> tuple[int, int]:
        """The zip directory of ``file`` (open) within the limits, before any file in it is read: its number
        of files and their size uncompressed."""
        limits, path = self.limits, self.path
        on_disk = os.fstat(file.fileno()).st_size
        if on_disk > limits.max_bytes:  # a zip is no larger than its content; and its directory is read whole
            raise self.refuse(
                f"the file is {human_size(on_disk)}, more than the limit of {human_size(limits.max_bytes)}",
                "--max-book-bytes",
            )
        try:
            with zipfile.ZipFile(file) as archive:  # reads the directory only
                entries = archive.infolist()
        except (zipfile.BadZipFile, zipfile.LargeZipFile, OSError, ValueError, EOFError) as err:
            raise InvalidInputError(f"{path}: not a readable EPUB ({type(err).__name__}: {err})") from None
        if len(entries) > limits.max_entries:
            raise self.refuse(
                f"the EPUB holds {len(entries)} files, more than the limit of {limits.max_entries}",
                "--max-book-entries",
            )
        total = 0
        for entry in entries:
            if entry.compress_type not in (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED):
                raise InvalidInputError(
                    f"{path}: {entry.filename} is compressed with zip method {entry.compress_type}; an EPUB's "
                    "files are stored or deflated, nothing else"
                )
            ratio = entry.file_size / max(entry.compress_size, 1)
            if entry.file_size > RATIO_FROM and ratio > limits.max_ratio:
                raise self.refuse(
                    f"{entry.filename} expands from {human_size(entry.compress_size)} to {human_size(entry.file_size)} "
                    f"({ratio:.0f}:1), more than the limit of {limits.max_ratio:g}:1 (a zip bomb?)",
                    "--max-book-ratio",
                )
            total += entry.file_size
        if total > limits.max_bytes:
            raise self.refuse(
                f"the EPUB's files add up to {human_size(total)} uncompressed, more than the limit of "
                f"{human_size(limits.max_bytes)}",
                "--max-book-bytes",
            )
        return len(entries), total

    def parse(self, data: bytes, what: str) -> None:
        """Count ``data`` against the budget of what is parsed as XML or HTML, before it is parsed."""
        self.text_left -= len(data)
        if self.text_left < 0:
            raise self.refuse(
                f"its XHTML and XML to parse pass the limit of {human_size(self.limits.max_text_bytes)} at {what}",
                "--max-book-text-bytes",
            )


def _epub_reader(epub):
    """ebooklib's reader within ``_Limits``. A file is read in bounded steps, at most to the size the zip
    directory gives it (zipfile's own ``read`` inflates a whole file at once, however much its stream holds);
    in all at most twice the files the directory lists and twice the bytes they add up to (ebooklib reads the
    NCX twice; a manifest naming one file again and again would read it without end). The container, the
    package document, the NCX and the navigation document are counted before ebooklib parses them."""

    class BoundedReader(epub.EpubReader):
        def __init__(self, file, limits: _Limits, entries: int, total: int):
            super().__init__(file, {"ignore_ncx": False})
            self.limits, self.entries_left, self.bytes_left = limits, 2 * entries, 2 * total

        def read_file(self, name):
            name = posixpath.normpath(name)  # as ebooklib's own
            info = self.zf.getinfo(name)  # KeyError, as ebooklib's own
            self.entries_left -= 1
            self.bytes_left -= info.file_size
            if self.entries_left < 0 or self.bytes_left < 0:
                raise InvalidInputError(
                    f"{self.limits.path}: the EPUB's manifest reads its files again and again (more than twice "
                    "what the zip holds); it is not a book kokoro-tvm reads"
                )
            with self.zf.open(info) as entry:
                data = entry.read(info.file_size)
            if name in ("META-INF/container.xml", posixpath.normpath(self.opf_file or ".")):
                self.limits.parse(data, name)  # parsed as soon as it is read
            return data

        def _parse_ncx(self, data):
            self.limits.parse(data, "the NCX table of contents")
            return super()._parse_ncx(data)

        def _parse_nav(self, data, base_path, navtype="toc"):
            self.limits.parse(data, "the navigation document")
            return super()._parse_nav(data, base_path, navtype)

    return BoundedReader


def _epub_chapters(path: Path, limits: EpubLimits) -> tuple[str, list[Chapter]]:
    try:
        import ebooklib
        from ebooklib import epub
    except ImportError:
        raise MissingAssetError("reading EPUB needs ebooklib: pip install 'kokoro-tvm-ext[book]'") from None
    bounds = _Limits(path, limits)
    with open(path, "rb") as file:  # one open file: what is checked is what is read
        entries, total = bounds.check_zip(file)
        try:
            reader = _epub_reader(epub)(file, bounds, entries, total)
            book = reader.load()
            reader.process()
        except InvalidInputError:
            raise
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
    texts = []
    for item in spine:
        # The document as stored: ebooklib's get_content() parses it into a tree and writes it out again first
        # (~60 times its size in memory for tiny elements, against ~20 for this parser alone).
        bounds.parse(item.content or b"", item.get_name())
        texts.append(html_text(item.content or b""))
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
