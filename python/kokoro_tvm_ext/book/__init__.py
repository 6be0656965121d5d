"""Long-form synthesis (``kokoro-tvm book``), one job per module:

* :mod:`.sources`     EPUB / markdown / text -> title and chapters;
* :mod:`.plan`        chapters -> units of whole paragraphs, and each chunk's noise seed;
* :mod:`.render`      one unit -> 16-bit samples and word timings (what every worker runs);
* :mod:`.job`         the job: its model, resume key and executor; the driver: resume, hand units to an
                      executor, assemble chapters, write the book;
* :mod:`.resume`      finished chapters kept beside the output, keyed by settings and text;
* :mod:`.output`      .m4b / .mp3 with chapter markers, or per-chapter files, and .srt;
* :mod:`.paths`       file names within the filesystem's byte limit; a killed run's temp files;
* :mod:`.ray_backend` the executor on a Ray cluster (Ray Core tasks, retried when a worker dies).

The speech server as a Ray Serve deployment is ``kokoro_tvm_ext.serve.ray_deployment``. Ray is optional (the
``ray`` extra); nothing but those two modules imports it.
"""
