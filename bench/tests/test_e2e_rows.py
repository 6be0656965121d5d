"""bench/e2e.py's rows without a model: a peer that cannot install, or whose runtime has no wheel for this
machine's architecture, becomes a row with its reason, a worker that crashes or raises becomes a failed row with
the signal or exception, the 1-thread runs join their rows, and the table shows both thread counts' RTF."""

import argparse
import platform
import re

import pytest
from kokoro_bench import e2e, venv_peers, workers
from kokoro_bench.peers import Unavailable

pytestmark = pytest.mark.unit  # no Kokoro, no server (tests/conftest.py tiers only the tests under tests/)


def _table(text: str) -> list[list[str]]:
    """The first markdown table of ``text`` as rows of cells (header first, the rule dropped)."""
    lines = text[text.index("|") :].split("\n\n")[0].splitlines()
    rows = [[c.strip() for c in line.strip("|").split("|")] for line in lines if line.startswith("|")]
    return [r for r in rows if not set("".join(r)) <= {"-"}]


def test_a_requirement_that_cannot_install_is_unavailable_with_one_line(tmp_path):
    missing = tmp_path / "no_such_peer-1.0-py3-none-any.whl"
    with pytest.raises(Unavailable) as err:
        venv_peers.ensure_venv("broken", [str(missing)], tmp_path)
    message = str(err.value)
    assert message.startswith("cannot install ") and "no_such_peer-1.0-py3-none-any.whl" in message
    # one line: the installer's output cut to 300 characters (pip may warn first, e.g. as root in a chroot)
    assert "\n" not in message and len(message) <= len(f"cannot install {missing} ()") + 300
    assert not (tmp_path / "broken").exists()  # no half-made virtualenv left to be reused


def test_a_made_virtualenv_is_reused_without_installing(tmp_path, monkeypatch):
    python = tmp_path / "peer" / "bin" / "python"
    python.parent.mkdir(parents=True)
    python.touch()
    (tmp_path / "peer" / "requirements.txt").write_text("peer==1.0\n")

    def no_installer(*args, **kwargs):
        raise AssertionError(f"ran {args[0]}")

    monkeypatch.setattr(venv_peers.subprocess, "run", no_installer)
    assert venv_peers.ensure_venv("peer", ["peer==1.0"], tmp_path) == str(python)


def test_prepare_turns_a_failed_install_into_a_skip_row(tmp_path, monkeypatch, capsys):
    broken = venv_peers.VenvPeer((str(tmp_path / "kokoro_pi-0-py3-none-any.whl"),), "kokoro-pi")
    monkeypatch.setitem(venv_peers.PEERS, "kokoro-pi", broken)
    monkeypatch.setattr(venv_peers, "bench_cache", lambda: tmp_path)
    ready = e2e.prepare({"system": "kokoro-pi", "weights": None, "voice": "af_heart", "threads": 1})
    assert set(ready) == {"unavailable"} and "kokoro_pi-0-py3-none-any.whl" in ready["unavailable"]

    e2e.print_rows([{"system": "kokoro-pi", **ready}], threads=2)
    header, row = _table(capsys.readouterr().out)
    assert row[header.index("system")] == "kokoro-pi"
    assert row[header.index("RTF 2 threads")] == "unavailable"
    assert row[header.index("note")] == ready["unavailable"]


def _row(system, tokens, rtf, text, threads):
    """A measured run of 2 s of audio (so seconds = 2 RTF)."""
    return {"system": system, "tokens": tokens, "text": text, "threads": threads, "rtf": rtf, "seconds": rtf * 2}


def test_one_thread_runs_join_their_rows_and_the_table_shows_both_columns(capsys):
    runs = [
        _row("tvm", 48, 0.25, "short", 2),
        _row("tvm", 48, 0.40, "short", 1),
        _row("torch", 48, 0.50, "short", 2),
        _row("torch", 48, 0.80, "short", 1),
        _row("ort-fp32", 48, 0.45, "short", 2),  # its 1-thread run failed
    ]
    rows = [dict(r, noise="own", audio_seconds=2.0) for r in runs if r["threads"] == 2]
    measured = e2e.merge_thread_counts(rows, runs, threads=2)
    assert [r["system"] for r in measured] == ["tvm", "torch", "ort-fp32"]
    assert [r.get("single_thread_rtf") for r in measured] == [0.40, 0.80, None]
    assert measured[0]["single_thread_seconds"] == pytest.approx(0.80)

    e2e.print_rows(rows, threads=2)
    out = capsys.readouterr().out
    header, *body = _table(out)
    two, one = header.index("RTF 2 threads"), header.index("RTF 1 thread")
    assert [(r[0], r[two], r[one]) for r in body] == [
        ("tvm", "0.250", "0.400"),
        ("torch", "0.500", "0.800"),
        ("ort-fp32", "0.450", ""),
    ]
    # ours against the fastest other row, per column: 0.25 / 0.45 and 0.40 / 0.80
    assert re.search(r"48 tokens, 2 threads: fastest peer ort-fp32 \(RTF 0\.450\); ours: tvm 0\.56x", out)
    assert re.search(r"48 tokens, 1 thread: fastest peer torch \(RTF 0\.800\); ours: tvm 0\.50x", out)


def test_a_one_thread_bench_has_a_single_rtf_column(capsys):
    rows = [dict(_row("tvm", 48, 0.4, "short", 1), noise="same", audio_seconds=2.0)]
    e2e.merge_thread_counts(rows, rows, threads=1)
    e2e.print_rows(rows, threads=1)
    header = _table(capsys.readouterr().out)[0]
    assert [h for h in header if h.startswith("RTF")] == ["RTF 1 thread"]


def test_a_worker_that_crashes_is_a_failed_row_with_its_signal(tmp_path, monkeypatch, capsys):
    # A peer whose worker process dies of SIGABRT (as a native library's assertion would kill it).
    (tmp_path / "crashing_peer.py").write_text("import os\n\ndef main():\n    os.abort()\n")
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    inputs = {key: tmp_path / f"{key}.npz" for key in e2e.TEXTS}
    args = argparse.Namespace(repeat=1, threads=2)
    runs = []
    failed = e2e.measure_system("crashing", {"module": "crashing_peer"}, inputs, [2], args, str(tmp_path), runs)
    assert failed == len(e2e.TEXTS)
    assert [(r["text"], r["failed"]) for r in runs] == [(key, "killed by SIGABRT") for key in e2e.TEXTS]

    capsys.readouterr()
    e2e.print_rows(runs, threads=2)
    body = _table(capsys.readouterr().out)[1:]
    assert [(r[0], r[4], r[-1]) for r in body] == [("crashing", "failed", "killed by SIGABRT")] * len(e2e.TEXTS)


def test_a_worker_that_raises_is_a_failed_row_with_its_exception(tmp_path, monkeypatch):
    (tmp_path / "raising_peer.py").write_text("def main():\n    raise MemoryError('the session needs 9 GB')\n")
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    job = {"system": "raising", "inputs": str(tmp_path / "x.npz"), "repeat": 1, "threads": 1, "sample_rate": 24000}
    with pytest.raises(workers.WorkerFailed) as err:
        workers.in_subprocess("raising_peer", "worker", job, 1, block_torch=False)
    assert err.value.reason == "MemoryError: the session needs 9 GB"


def test_on_aarch64_a_row_without_an_aarch64_wheel_is_unavailable_with_its_reason(monkeypatch, capsys):
    monkeypatch.setattr(platform, "machine", lambda: "aarch64")
    reasons = e2e.unavailable_here(e2e.SYSTEMS)
    assert reasons["zentorch"] == "its runtime has no aarch64 wheel on PyPI (only x86_64)"
    # every other row's runtime has aarch64 wheels: at most "not installed" here, never the architecture
    assert [s for s, why in reasons.items() if "wheel" in why] == ["zentorch"]

    e2e.print_rows([{"system": "zentorch", "unavailable": reasons["zentorch"]}], threads=4)
    header, row = _table(capsys.readouterr().out)
    assert (row[header.index("RTF 4 threads")], row[header.index("note")]) == ("unavailable", reasons["zentorch"])

    e2e.print_machine(["tvm", "zentorch", "kokoro-pi"], [4, 1])
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("machine: ")
    assert lines[1:4] == [
        "  tvm: can run here",
        "  zentorch: unavailable: its runtime has no aarch64 wheel on PyPI (only x86_64)",
        "  kokoro-pi: can run here",
    ]


def test_on_x86_every_row_has_its_wheel(monkeypatch):
    monkeypatch.setattr(platform, "machine", lambda: "x86_64")
    monkeypatch.setattr(e2e, "RUNTIMES", {})  # whatever is installed here
    assert e2e.unavailable_here(e2e.SYSTEMS) == {}


def test_a_row_whose_runtime_is_not_installed_says_which_extra(monkeypatch):
    monkeypatch.setattr(e2e, "RUNTIMES", {"ort": "no_such_runtime_here"})
    reasons = e2e.unavailable_here(["tvm", "ort-int8", "ort-fp32"], arch="aarch64")
    assert reasons == dict.fromkeys(
        ["ort-int8", "ort-fp32"], "no_such_runtime_here is not installed (pip install 'kokoro-tvm-ext[bench]')"
    )


def test_the_note_says_when_our_row_ran_another_precision_than_it_asks():
    # tvm-fast on a CPU without bf16 kernels (every aarch64 CPU today): the fp32 artifact, said in the note
    assert e2e.precision_note("tvm-fast", "fp32", None) == "precision fp32 (bf16 has no kernels for this CPU)"
    assert e2e.precision_note("tvm-int8", "fp32", None) == "precision fp32 (int8 has no kernels for this CPU)"
    assert e2e.precision_note("tvm-fast", "bf16", None) is None and e2e.precision_note("tvm", "fp32", None) is None
    # a peer's own choice (OpenVINO's bf16 hint where it has no bf16 path)
    assert e2e.precision_note("openvino-bf16", None, "f32") == "precision f32"
    assert e2e.precision_note("ort-fp32", None, None) is None
