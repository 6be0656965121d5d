"""Units of whole paragraphs and per-chunk seeds: what makes a cluster run equal a local one."""

from __future__ import annotations

import numpy as np

from kokoro_tvm_ext.book.plan import Unit, chapter_units, chunk_seed
from kokoro_tvm_ext.book.sources import Chapter


def test_units_pack_whole_paragraphs_in_order():
    chapter = Chapter("c", ("aaaa", "bbb", "cc", "d" * 12, "e"))
    assert chapter_units(chapter, 3, max_chars=9) == [
        Unit(3, 0, ("aaaa", "bbb", "cc")),  # 4 + 3 + 2 = 9
        Unit(3, 1, ("d" * 12,)),  # longer than a unit: alone, whole
        Unit(3, 2, ("e",)),
    ]


def test_a_chunk_seed_depends_on_its_position_only():
    seeds = {(c, u, k): chunk_seed(7, c, u, k) for c in range(3) for u in range(3) for k in range(3)}
    assert len(set(seeds.values())) == len(seeds)  # no two positions share a seed
    assert chunk_seed(7, 1, 2, 0) == seeds[(1, 2, 0)]  # the same position, the same seed, whenever asked
    assert chunk_seed(8, 1, 2, 0) != seeds[(1, 2, 0)]
    # numpy accepts it as a generator seed
    np.random.default_rng(chunk_seed(0, 0, 0, 0)).random()
