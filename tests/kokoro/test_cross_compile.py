"""Kokoro cross-compiled for aarch64 on this x86-64 machine, and an artifact refused on the wrong architecture.

The session's random-weights model compiled for cortex-a76 (a Raspberry Pi 5's CPU) and linked by Debian's
aarch64-linux-gnu-gcc: an aarch64 ELF library, a library-only artifact (its weight transforms are the
library's code, which cannot run here: the weights are bound on the Pi), its meta.json naming the architecture
and the ARM features. Running it needs an aarch64 machine (or an arm64 Python under emulation): here, what is
checked is that every way of loading it on x86-64 is refused in one line naming both architectures, and that
an x86-64 artifact is refused the same way on an aarch64 machine.
"""

from __future__ import annotations

import json
import re
import shutil
import struct
import subprocess
import sys
import zipfile
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("torch")
pytest.importorskip("kokoro")

from system_tools import CROSS_COMPILER, require  # noqa: E402

import kokoro_tvm_ext  # noqa: E402
from kokoro_tvm_ext.errors import UnsupportedCPUError  # noqa: E402
from kokoro_tvm_ext.model import artifact_cache  # noqa: E402
from kokoro_tvm_ext.model.runtime import cpu_features  # noqa: E402
from kokoro_tvm_ext.model.runtime.artifact import (  # noqa: E402
    LIBRARY,
    META,
    WEIGHTS,
    holds_checkpoint,
    read_meta,
    sealed,
)
from kokoro_tvm_ext.speech import SpeakerConfig  # noqa: E402

EM_AARCH64 = 183  # ELF e_machine of aarch64 (EM_X86_64 is 62)

if cpu_features.host_arch() != "x86_64":
    pytest.skip("cross-compiles for aarch64 from an x86-64 machine", allow_module_level=True)


def elf_machine(path) -> int:
    header = path.read_bytes()[:20]
    assert header[:4] == b"\x7fELF" and header[4] == 2 and header[5] == 1  # 64-bit, little-endian
    return struct.unpack_from("<H", header, 18)[0]


def test_the_library_is_an_aarch64_elf_without_weights(arm_library, small_artifact):
    assert elf_machine(arm_library / LIBRARY) == EM_AARCH64
    assert elf_machine(small_artifact / LIBRARY) == 62  # this machine's, for contrast
    meta = read_meta(arm_library)
    assert meta["arch"] == "aarch64" and read_meta(small_artifact)["arch"] == "x86_64"
    assert meta["target"] == {"kind": "llvm", "mtriple": "aarch64-linux-gnu", "mcpu": "cortex-a76"}
    # LLVM's cortex-a76, as QEMU's cortex-a76 reports it in AT_HWCAP (tests/test_cpu_features.py).
    assert meta["cpu_features"] == ["crc", "dotprod", "fp-armv8", "fullfp16", "lse", "neon", "rcpc", "rdm"]
    assert not holds_checkpoint(meta) and meta["weights_fingerprint"] is None
    assert set(meta["checkpoint_weights"].values()) == {0}
    assert meta["checkpoint_inputs"] == read_meta(small_artifact)["checkpoint_inputs"]  # what binding takes
    assert meta["token_embeddings"] == []  # found among the weights when they are bound
    assert (arm_library / WEIGHTS).stat().st_size == 0  # Kokoro's library has no constants of its own


REFUSAL = (
    "was compiled for aarch64 (cortex-a76: neon, dotprod); this machine is x86_64: compile Kokoro for this "
    "machine (`kokoro-tvm compile`, or let `kokoro-tvm say` compile it), or run this artifact on an aarch64 machine"
)


def test_loading_it_here_is_refused_in_one_line_naming_both(arm_library, tmp_path, capsys):
    with pytest.raises(UnsupportedCPUError) as caught:
        kokoro_tvm_ext.KokoroTVM(arm_library)
    assert str(caught.value) == f"{arm_library} {REFUSAL}"

    # Given as the artifact, it is refused before any weights are looked for (none exist at that path).
    config = SpeakerConfig(artifact=arm_library, weights=tmp_path / "no-such-weights.safetensors")
    with pytest.raises(UnsupportedCPUError, match="this machine is x86_64"):
        config.resolved()

    from kokoro_tvm_ext.cli import main

    voice = tmp_path / "voice.npy"
    np.save(voice, np.zeros((510, 1, 256), np.float32))
    out = tmp_path / "out.wav"
    say = ["say", "--artifact", str(arm_library), "--phonemes", "hˈɛlO", "--voice", str(voice), "-o", str(out)]
    assert main(say) == 3
    err = capsys.readouterr().err
    assert f"{arm_library} {REFUSAL}" in err and "Traceback" not in err and len(err.strip().splitlines()) == 1
    assert not out.exists()


def test_compile_says_where_it_is_and_what_to_do_on_the_target(arm_library, tmp_path, monkeypatch, capsys):
    """`kokoro-tvm compile --target cortex-a76`: the entry on stdout, what to do with it on stderr (the compile
    is the fixture's, copied: its real run is the fixture)."""
    from kokoro_tvm_ext.cli import main

    def compile_by_copy(model, out_dir, **kwargs):
        assert kwargs["target"]["mtriple"] == "aarch64-linux-gnu"
        for name in (LIBRARY, WEIGHTS, META):
            shutil.copy(arm_library / name, out_dir / name)

    monkeypatch.setenv("KOKORO_TVM_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(artifact_cache, "load_kmodel", lambda weights: None)
    monkeypatch.setattr(artifact_cache, "compile_kokoro", compile_by_copy)
    weights = tmp_path / "w.safetensors"
    weights.write_bytes(b"never read")
    assert main(["compile", "--weights", str(weights), "--target", "cortex-a76"]) == 0
    captured = capsys.readouterr()
    entry = captured.out.strip()
    assert entry.startswith(str(tmp_path / "cache" / "artifacts" / "library-"))
    compiling, hint = captured.err.strip().splitlines()
    assert compiling.startswith("kokoro-tvm: compiling Kokoro for the target cortex-a76")
    assert hint.startswith(f"kokoro-tvm: {entry} is Kokoro compiled for aarch64 (cortex-a76: neon, dotprod), without")
    assert "copy it to that machine" in hint and "kokoro-tvm say --artifact DIR" in hint


def resealed(artifact, out, **changes):
    """A copy of ``artifact`` (links to its files) whose meta.json has ``changes``, resealed as a compile would."""
    out.mkdir()
    for name in (LIBRARY, WEIGHTS):
        (out / name).symlink_to(artifact / name)
    meta = {**json.loads((artifact / META).read_text()), **changes}
    (out / META).write_text(json.dumps(sealed(meta)))
    return out


def test_an_x86_artifact_is_refused_on_an_aarch64_machine(small_artifact, tmp_path, monkeypatch):
    """The reverse direction, on x86-64: this machine's artifact with its meta.json saying aarch64 (as a copy
    from an ARM machine would), and this machine's artifact as an aarch64 machine (platform and HWCAP as QEMU's
    cortex-a76 reports them) sees it."""
    claimed = resealed(small_artifact, tmp_path / "from-a-pi", arch="aarch64", target={"kind": "llvm", "mcpu": "a76"})
    with pytest.raises(UnsupportedCPUError) as caught:
        kokoro_tvm_ext.KokoroTVM(claimed)
    assert str(caught.value).startswith(f"{claimed} was compiled for aarch64 (a76); this machine is x86_64: ")

    meta = read_meta(small_artifact)
    monkeypatch.setattr(cpu_features.platform, "machine", lambda: "aarch64")
    monkeypatch.setattr(cpu_features, "hwcaps", lambda: (0x119FFB, 0))
    with pytest.raises(UnsupportedCPUError) as caught:
        kokoro_tvm_ext.KokoroTVM(small_artifact)
    message = str(caught.value)
    assert message.startswith(f"{small_artifact} was compiled for x86_64 ({meta['target']['mcpu']}")
    assert "; this machine is aarch64: " in message and "\n" not in message
    # An artifact of before `arch` (none of them has it) is x86_64.
    older = resealed(small_artifact, tmp_path / "older")
    old = {k: v for k, v in json.loads((older / META).read_text()).items() if k not in ("arch", "field_sha256")}
    (older / META).write_text(json.dumps(sealed(old)))
    assert "arch" not in read_meta(older)
    with pytest.raises(UnsupportedCPUError, match=r"was compiled for x86_64 .*; this machine is aarch64"):
        kokoro_tvm_ext.KokoroTVM(older)


def test_the_companion_wheel_packs_an_aarch64_level_in_a_wheel_of_its_own(arm_library, small_artifact, tmp_path):
    """scripts/build_artifacts_wheel.py groups levels by architecture: the x86 library and the aarch64 one land in
    two wheels, each tagged with its architecture (read from the ELF) and glibc, so pip installs each where its
    library runs, and refuses the other."""
    root = Path(__file__).resolve().parents[2]
    level = json.loads((small_artifact / "meta.json").read_text())["target"]["mcpu"]
    command = [sys.executable, root / "scripts" / "build_artifacts_wheel.py", tmp_path / "dist"]
    command += ["--artifact", f"{level}={small_artifact}", "--artifact", f"cortex-a76={arm_library}"]
    subprocess.run(command, check=True, capture_output=True)
    wheels = sorted(p.name for p in (tmp_path / "dist").glob("*.whl"))
    assert len(wheels) == 2 and re.fullmatch(r".*-py3-none-manylinux_2_\d+_aarch64\.whl", wheels[0]), wheels
    assert re.fullmatch(r".*-py3-none-manylinux_2_\d+_x86_64\.whl", wheels[1]), wheels
    with zipfile.ZipFile(tmp_path / "dist" / wheels[0]) as arm:
        library = arm.read("kokoro_tvm_ext_artifacts/cortex-a76/kokoro.so")
        assert int.from_bytes(library[18:20], "little") == 183 and not arm.read(
            "kokoro_tvm_ext_artifacts/cortex-a76/weights.bin"
        )
        assert not [n for n in arm.namelist() if n.startswith(f"kokoro_tvm_ext_artifacts/{level}/")]
    refused = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--no-deps",
            "--target",
            tmp_path / "site",
            tmp_path / "dist" / wheels[0],
        ],
        capture_output=True,
        text=True,
    )
    assert refused.returncode != 0 and "is not a supported wheel on this platform" in refused.stderr, refused.stderr


@pytest.mark.system_tools
def test_an_int8_library_cross_compiles_for_a_pi_5(request, tmp_path, monkeypatch, capsys):
    """`kokoro-tvm compile --target cortex-a76 --precision int8`: a named target gets the precision asked, whatever
    this machine computes in (here its int8 instructions hidden); the Pi decides at load (SDOT with dotprod, else
    fp32 kernels with a notice). The library calls the int8 kernels. The compile is kept in the user cache, as
    ``arm_library``'s."""
    require(*CROSS_COMPILER)  # before the model is built
    kokoro_model = request.getfixturevalue("kokoro_model")
    from kokoro_tvm_ext.cli import main
    from kokoro_tvm_ext.support.cache import cache_dir

    monkeypatch.setenv("KOKORO_TVM_CACHE", str(cache_dir() / "test-artifacts" / "cross-int8"))
    monkeypatch.setenv("KOKORO_TVM_EXT_NO_VNNI", "1")
    monkeypatch.setattr(artifact_cache, "load_kmodel", lambda weights: kokoro_model)
    weights = tmp_path / "w.safetensors"
    weights.write_bytes(b"never read")
    command = ["compile", "--weights", str(weights), "--target", "cortex-a76", "--precision", "int8"]
    assert main(command) == 0
    out = Path(capsys.readouterr().out.strip())
    meta = read_meta(out)
    assert (meta["arch"], meta["precision"], meta["target"]["mcpu"]) == ("aarch64", "int8", "cortex-a76")
    assert "dotprod" in meta["cpu_features"] and not holds_checkpoint(meta)
    library = (out / LIBRARY).read_bytes()
    assert elf_machine(out / LIBRARY) == EM_AARCH64
    assert b"kokoro_tvm_ext.conv1d_int8" in library and b"kokoro_tvm_ext.matmul_int8" in library
