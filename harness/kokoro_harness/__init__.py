"""What the tests and the benchmarks both use to drive and judge Kokoro from outside the installed package:
a free loopback port (``ports``), a running server's health and metrics (``server``), a local two-node Ray cluster
(``local_ray``), the offline recognizer (``recognizer``) and distances between audio (``fidelity``).

Neither tests nor bench: the tests never import the benchmarks (tests/test_no_bench_imports.py checks it), and
both import this. ``harness/`` is on ``sys.path`` through pytest's ``pythonpath`` (pyproject.toml) and through
``kokoro_bench`` (bench/kokoro_bench/__init__.py)."""
