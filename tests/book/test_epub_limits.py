"""EPUBs that would cost far more than their size: zip bombs, a zip directory that understates a file, a manifest
naming one file again and again, XHTML or tables of contents made of tiny elements. Each is refused in one line
naming the limit and its flag before the cost is paid; memory is measured in a separate process running
`kokoro-tvm book`. The EPUBs are made here: a real one from ebooklib (book_inputs.make_epub), then rewritten."""

from __future__ import annotations

import struct
import subprocess
import sys
import zipfile

import pytest
from book_inputs import make_epub

from kokoro_tvm_ext.book.sources import Chapter, EpubLimits, read_book
from kokoro_tvm_ext.cli import main
from kokoro_tvm_ext.errors import InvalidInputError

MIB = 1 << 20
CHAPTER = "EPUB/one.xhtml"  # where ebooklib puts make_epub's document


def small_epub(path):
    return make_epub(path, [("one.xhtml", "<h1>One</h1><p>It begins.</p>")], toc=[("One", "one.xhtml")])


def rewritten(source, out, replace: dict, method=zipfile.ZIP_DEFLATED):
    """``source``'s files copied to ``out``, those named in ``replace`` given new content: bytes, or a
    (block, count) pair written block by block (2 GB of zeros never sits in memory)."""
    with zipfile.ZipFile(source) as src, zipfile.ZipFile(out, "w") as dst:
        for info in src.infolist():
            if info.filename not in replace:
                dst.writestr(info, src.read(info))
                continue
            content = replace[info.filename]
            if isinstance(content, bytes):
                dst.writestr(info.filename, content, compress_type=method)
                continue
            block, count = content
            streamed = zipfile.ZipInfo(info.filename)
            streamed.compress_type = method
            with dst.open(streamed, "w", force_zip64=True) as f:
                for _ in range(count):
                    f.write(block)
    return out


def zip_bomb(tmp_path, megabytes: int):
    """A real EPUB whose chapter is ``megabytes`` MiB of zeros, deflated ~1000:1."""
    return rewritten(small_epub(tmp_path / "small.epub"), tmp_path / "bomb.epub", {CHAPTER: (bytes(MIB), megabytes)})


MEASURE = """
import sys
import ebooklib.epub  # imported before the baseline: its import is not what is measured
import kokoro_tvm_ext.cli.book
from kokoro_tvm_ext.cli import main

def kib(field):
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) for line in status if line.startswith(field))

before = kib("VmRSS:")
code = main(sys.argv[1:])
print("GROWTH_MB", (kib("VmHWM:") - before) / 1024, "EXIT", code)
"""


def run_book_measured(epub, out, *flags):
    """`kokoro-tvm book` in a fresh process: (exit code, stderr, how far its peak RSS rose above the RSS before)."""
    done = subprocess.run(
        [sys.executable, "-c", MEASURE, "book", str(epub), "-o", str(out), "-q", *flags],
        capture_output=True,
        text=True,
        timeout=600,
    )
    words = done.stdout.split()
    assert "GROWTH_MB" in words, done.stdout + done.stderr
    return int(words[words.index("EXIT") + 1]), done.stderr, float(words[words.index("GROWTH_MB") + 1])


def test_a_2_mb_epub_that_expands_to_2_gb_is_refused_before_memory_grows(tmp_path):
    bomb = zip_bomb(tmp_path, 2048)
    assert bomb.stat().st_size < 2.5 * MIB
    with zipfile.ZipFile(bomb) as z:
        assert z.getinfo(CHAPTER).file_size == 2048 * MIB

    code, stderr, growth = run_book_measured(bomb, tmp_path / "book.m4b")
    assert code == 2
    lines = stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in stderr, stderr
    assert f"{CHAPTER} expands from 2.0 MiB to 2.0 GiB" in lines[0]
    assert "more than the limit of 100:1" in lines[0] and "--max-book-ratio" in lines[0]
    assert growth < 100, f"RSS grew by {growth:.0f} MB"
    assert not (tmp_path / "book.m4b").exists() and not (tmp_path / ".book.m4b.book").exists()

    # With the ratio raised, the size of it all is what stops it, as early and as cheaply.
    code, stderr, growth = run_book_measured(bomb, tmp_path / "book.m4b", "--max-book-ratio", "2000")
    assert code == 2 and "add up to 2.0 GiB uncompressed, more than the limit of 256.0 MiB" in stderr
    assert "--max-book-bytes" in stderr and growth < 100


def understated(epub, name: str, stated: int):
    """``epub`` with the zip directory's record of ``name`` claiming ``stated`` bytes uncompressed."""
    data = bytearray(epub.read_bytes())
    at = 0
    while True:
        at = data.index(b"PK\x01\x02", at)  # a central directory record
        name_length = struct.unpack_from("<H", data, at + 28)[0]
        if data[at + 46 : at + 46 + name_length].decode() == name:
            struct.pack_into("<I", data, at + 24, stated)
            epub.write_bytes(data)
            return epub
        at += 4


def test_a_zip_directory_understating_a_file_reads_no_more_than_it_states(tmp_path):
    # 500 MiB of zeros (500 KB on disk) whose directory record says 1,000 bytes: every check passes (1,000
    # bytes, ratio < 1), and zipfile's read() would inflate all 500 MiB at once.
    bomb = understated(zip_bomb(tmp_path, 500), CHAPTER, 1000)
    code, stderr, growth = run_book_measured(bomb, tmp_path / "book.m4b")
    assert code == 2 and len(stderr.strip().splitlines()) == 1, stderr
    assert "not a readable EPUB (BadZipFile: Bad CRC-32" in stderr
    assert growth < 100, f"RSS grew by {growth:.0f} MB"


def test_each_limit_is_refused_in_one_line_naming_its_flag(tmp_path):
    epub = small_epub(tmp_path / "small.epub")
    with zipfile.ZipFile(epub) as z:
        entries, total = len(z.infolist()), sum(i.file_size for i in z.infolist())
    assert read_book(epub).chapters == [Chapter("One", ("One", "It begins."))]  # within every limit

    cases = [
        (EpubLimits(max_entries=entries - 1), f"holds {entries} files, more than the limit of {entries - 1}"),
        (EpubLimits(max_bytes=total - 1), "add up to"),
        (EpubLimits(max_bytes=epub.stat().st_size - 1), "the file is"),
        (EpubLimits(max_text_bytes=10), "its XHTML and XML to parse pass the limit of 10 bytes at META-INF"),
    ]
    flags = ["--max-book-entries", "--max-book-bytes", "--max-book-bytes", "--max-book-text-bytes"]
    for (limits, message), flag in zip(cases, flags):
        with pytest.raises(InvalidInputError, match=message) as caught:
            read_book(epub, limits)
        assert flag in str(caught.value) and "\n" not in str(caught.value)

    # A large file's ratio counts; a small one's does not (a short file of repeated characters compresses well).
    spaces = rewritten(
        epub, tmp_path / "spaces.epub", {CHAPTER: b"<html><body><p>Hi.</p>" + b" " * 1000 + b"</body></html>"}
    )
    assert read_book(spaces).chapters == [Chapter("One", ("Hi.",))]
    big = rewritten(epub, tmp_path / "big.epub", {CHAPTER: (b"<p>Hi.</p>" + b" " * 1014, 1025)})
    with pytest.raises(InvalidInputError, match=r"expands from .* to 1.0 MiB \(\d+:1\), more than the limit of 100:1"):
        read_book(big)
    assert len(read_book(big, EpubLimits(max_ratio=5000)).chapters[0].paragraphs) == 1025


def test_only_stored_and_deflated_files_are_read(tmp_path):
    # bzip2 inflates a 4 KB read into as much as it likes; EPUB allows only these two methods.
    epub = rewritten(small_epub(tmp_path / "s.epub"), tmp_path / "bz.epub", {CHAPTER: b"<p>x</p>"}, zipfile.ZIP_BZIP2)
    with pytest.raises(InvalidInputError, match=f"{CHAPTER} is compressed with zip method 12; .* stored or deflated"):
        read_book(epub)


def test_a_manifest_naming_one_file_again_and_again_is_refused(tmp_path):
    epub = small_epub(tmp_path / "s.epub")
    with zipfile.ZipFile(epub) as z:
        opf = z.read("EPUB/content.opf").decode()
    items = "".join(f'<item href="one.xhtml" id="again{i}" media-type="application/xhtml+xml"/>' for i in range(50))
    opf = opf.replace("<manifest>", "<manifest>" + items)
    again = rewritten(epub, tmp_path / "again.epub", {"EPUB/content.opf": opf.encode()})
    with pytest.raises(InvalidInputError, match="reads its files again and again"):
        read_book(again)


def test_tables_of_contents_count_before_ebooklib_parses_them(tmp_path):
    """The NCX and the navigation document are parsed by ebooklib inside its load (lxml: ~30 times their size
    for tiny elements); each is counted against --max-book-text-bytes first."""
    epub = small_epub(tmp_path / "s.epub")
    with zipfile.ZipFile(epub) as z:
        size = {i.filename: i.file_size for i in z.infolist()}
    before_ncx = size["META-INF/container.xml"] + size["EPUB/content.opf"]
    with pytest.raises(InvalidInputError, match="pass the limit of .* at the NCX table of contents"):
        read_book(epub, EpubLimits(max_text_bytes=before_ncx))
    with pytest.raises(InvalidInputError, match="pass the limit of .* at the navigation document"):
        read_book(epub, EpubLimits(max_text_bytes=before_ncx + size["EPUB/toc.ncx"]))


def test_chapters_of_tiny_elements_count_before_they_are_parsed(tmp_path):
    # 20 MiB of <p>ab</p> deflates ~500:1 past the ratio check only with the ratio raised; parsed, it would take
    # ~20 times its size. The chapter is refused by its size first, naming it.
    epub = rewritten(small_epub(tmp_path / "s.epub"), tmp_path / "tiny.epub", {CHAPTER: (b"<p>ab</p>" * 1024, 2300)})
    with pytest.raises(InvalidInputError, match="pass the limit of 16.0 MiB at one.xhtml; .*--max-book-text-bytes"):
        read_book(epub, EpubLimits(max_ratio=10_000))


def test_the_flags_reach_the_limits_and_bad_values_are_one_line(tmp_path, capsys):
    epub = small_epub(tmp_path / "s.epub")
    out = tmp_path / "book.m4b"
    assert main(["book", str(epub), "-o", str(out), "-q", "--max-book-entries", "2"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("kokoro-tvm book: ") and "more than the limit of 2; " in err and "--max-book-entries" in err
    for flag, value in [("--max-book-bytes", "0"), ("--max-book-text-bytes", "-1"), ("--max-book-ratio", "nan")]:
        assert main(["book", str(epub), "-o", str(out), "-q", flag, value]) == 2
        assert f"{flag} must be at least 1" in capsys.readouterr().err
