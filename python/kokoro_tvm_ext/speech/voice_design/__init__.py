"""Design a voice of your own from recordings (``kokoro-tvm voices design``): one job a module.

- :mod:`.recordings`: read and check the recordings (any format and rate PyAV reads, bounded);
- :mod:`.space`: voice packs as a dozen numbers (blends of the nearest stock packs + their principal directions);
- :mod:`.scoring`: a candidate's score (speaker similarity on test sentences, consistency, staying in the region);
- :mod:`.state`: the saved progress that makes a design resumable;
- :mod:`.search`: the search (CMA-ES, or a random walk as the baseline) and the voice file it writes.
"""

from kokoro_tvm_ext.speech.voice_design.search import Design, DesignOptions, default_precision, design

__all__ = ["Design", "DesignOptions", "default_precision", "design"]
