"""A pandoc-style EPUB spoken with `kokoro-tvm book --subtitles`: the author line "A. Tester" is one cue (an
initial ends no sentence), and a chapter heading is a cue of its own, not run into the sentence after it."""

from __future__ import annotations

import re

from book_inputs import book_args, make_epub

from kokoro_tvm_ext.cli import main


def test_an_initial_stays_in_its_cue_and_a_heading_is_its_own(tmp_path, artifact, voice_file):
    epub = make_epub(
        tmp_path / "tester.epub",
        [
            ("title.xhtml", '<h1 class="title">A Test Book</h1><p class="author">A. Tester</p>'),
            ("ch1.xhtml", '<section class="level1"><h1>Chapter one</h1><p>It was late. Dr. Smith came.</p></section>'),
        ],
        toc=[("Chapter one", "ch1.xhtml")],
    )
    out = tmp_path / "out"
    assert main(book_args(epub, out, artifact, voice_file, "--subtitles")) == 0
    cues = [re.findall(r"\d+\n[\d:,]+ --> [\d:,]+\n(.+)\n", srt.read_text()) for srt in sorted(out.glob("*.srt"))]
    assert cues == [["A Test Book", "A. Tester"], ["Chapter one", "It was late.", "Dr. Smith came."]]
