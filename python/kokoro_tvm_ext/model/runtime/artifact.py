"""The compiled artifact on disk: ``kokoro.so``, ``weights.bin`` and ``meta.json``, and their integrity.

``meta.json`` records each file's size and sha256. A cut-short file (an
interrupted copy) would otherwise be mapped (by ``dlopen``, or as weights) and
kill the process with a bus error on first touch, and an altered library could
run anything; both are refused with an error that names the file and says to
compile again.

``meta.json`` itself is checked field by field before anything reads it: each
field's type and range (``FIELDS``), and each field's sha256 as compiled
(``field_sha256``), so a field edited by hand, flipped on disk or swapped (two
``weights_index`` offsets) is refused by name instead of giving wrong audio, a
traceback, or an out-of-bounds read. The digests sit in the file they cover, so
they stop accidents, not a deliberate editor: whoever can write the directory can
replace ``kokoro.so``, which is code this process runs. Against that no checksum
beside the files helps, so an artifact is loaded only from a directory no other user
can change (``check_not_shared``: neither it, a file in it nor a directory above it
belongs to another user or is writable by others, as ssh checks a key file); a
library owned by root, such as the prebuilt ones installed in site-packages, is fine.
What must hold even then (token ids inside the embedding) the runtime checks
against the weights themselves (``KokoroTVM``).

An artifact holds one compiled library and one checkpoint's weights (bound to it by
model/binding.py), or the library alone (``holds_checkpoint`` false: a prebuilt
library, model/prebuilt.py), which loads only once a checkpoint is bound to it.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from pathlib import Path

from kokoro_tvm_ext.model.runtime.weights import WEIGHTS, index_problem
from kokoro_tvm_ext.model.spec import MAX_TOKENS
from kokoro_tvm_ext.plugin.choices import LSTM_IMPLS, PRECISIONS
from kokoro_tvm_ext.support.cache import shared_problem
from kokoro_tvm_ext.support.errors import ArtifactCorruptError, ArtifactMissingError, AssetError
from kokoro_tvm_ext.support.file_hash import file_sha256, remembered_sha256

LIBRARY = "kokoro.so"
META = "meta.json"
# Each file and the prefix of its size and sha256 in meta.json (library_bytes, ...):
# checked by size on every load, by sha256 once per version of the file.
FILES = {LIBRARY: "library", WEIGHTS: "weights"}
# Bumped whenever the kernels' packed weights change layout, since an artifact
# carries them as constants, or meta.json gains a field loading relies on:
# 2 = Winograd F(4,7) (was F(2,7)), new interpolation points; 3 = library size and sha256;
# 4 = weights lifted out of the library into weights.bin; 5 = every field checked and
# its sha256 recorded (field_sha256), token_embeddings; 6 = the library takes the checkpoint's
# tensors (checkpoint_inputs) and transforms them itself (model/binding.py).
FORMAT_VERSION = 6
RECOMPILE_HINT = "compile again (`kokoro-tvm compile`, or delete it to let `kokoro-tvm say` rebuild it)"
DIGESTS = "field_sha256"


def field_digest(value) -> str:
    """sha256 of a field's canonical JSON (sorted keys, no spaces): the same for any formatting."""
    return hashlib.sha256(json.dumps(value, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def sealed(record: dict) -> dict:
    """``record`` with ``field_sha256``: the digest of each of its other fields."""
    fields = {k: v for k, v in record.items() if k != DIGESTS}
    return {**fields, DIGESTS: {k: field_digest(v) for k, v in fields.items()}}


def write_meta(out_dir: Path, meta: dict) -> None:
    """Write ``meta.json`` for the files already in ``out_dir`` (their sizes and hashes included)."""
    out_dir = Path(out_dir)
    record = {"format_version": FORMAT_VERSION, **meta}
    for name in FILES:
        record[_key(name, "bytes")] = (out_dir / name).stat().st_size
        record[_key(name, "sha256")] = file_sha256(out_dir / name)
    tmp = out_dir / (META + ".tmp")
    tmp.write_text(json.dumps(sealed(record), indent=2, sort_keys=True))
    os.replace(tmp, out_dir / META)


def _key(name: str, what: str) -> str:
    return f"{FILES[name]}_{what}"


# -- what each field must be: a test of the value and its description --------------------
def _is_int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _int(low: int, high: int | None = None):
    def check(value) -> bool:
        return _is_int(value) and value >= low and (high is None or value <= high)

    return check, f"an integer >= {low}" if high is None else f"an integer in {low}..{high}"


def _one_of(choices: tuple):
    return (lambda value: value in choices), f"one of {', '.join(choices)}"


def _is_target(value) -> bool:
    return (isinstance(value, dict) and isinstance(value.get("kind"), str)) or (isinstance(value, str) and value != "")


def _is_embedding_list(value) -> bool:
    return isinstance(value, list) and all(
        isinstance(e, list) and len(e) == 2 and isinstance(e[0], str) and _is_int(e[1]) for e in value
    )


def _is_checkpoint_inputs(value) -> bool:
    return isinstance(value, dict) and all(
        isinstance(entries, list)
        and all(
            isinstance(e, list)
            and len(e) == 3
            and isinstance(e[0], list)
            and len(e[0]) in (1, 2)
            and all(isinstance(k, str) and k for k in e[0])
            and isinstance(e[1], list)
            and all(_is_int(d) and d >= 0 for d in e[1])
            and e[2] in ("float32", "float64")
            for e in entries
        )
        for entries in value.values()
    )


_SHA256 = re.compile(r"[0-9a-f]{64}")
_TEXT = (lambda v: isinstance(v, str) and v != ""), "a non-empty string"
_HEX = (lambda v: isinstance(v, str) and _SHA256.fullmatch(v) is not None), "a sha256 (64 hex digits)"
# Every field of meta.json but format_version (checked first, to tell an older artifact apart).
# Fields an artifact may lack, and what their absence means: ``arch`` came with cross-compiling, and every
# artifact written before it was compiled for x86_64.
OPTIONAL = {"arch": "x86_64"}
FIELDS = {
    "arch": (
        (lambda v: isinstance(v, str) and re.fullmatch(r"[a-z0-9_]+", v) is not None),
        "an architecture name (x86_64, aarch64)",
    ),
    "kokoro_tvm_ext": _TEXT,
    "tvm": _TEXT,
    "target": (_is_target, "an LLVM target (an object with a 'kind', or a string)"),
    "cpu_features": (
        lambda v: isinstance(v, list) and all(isinstance(f, str) for f in v),
        "a list of CPU feature names (what loading checks this CPU for)",
    ),
    "lstm_impl": _one_of(LSTM_IMPLS),
    "precision": _one_of(PRECISIONS),
    "max_tokens": _int(1, MAX_TOKENS),
    "max_batch": _int(1),
    "n_token": _int(2),
    "sample_rate": _int(1),
    "samples_per_frame": _int(1),
    "harmonics": _int(1),
    "weights_fingerprint": ((lambda v: v is None or _TEXT[0](v)), "a non-empty string or null"),
    "weights_index": ((lambda v: isinstance(v, dict)), "an object: function name -> its weights"),
    "token_embeddings": (_is_embedding_list, "a list of [function, weight number]"),
    "checkpoint_inputs": (_is_checkpoint_inputs, "an object: function -> [[state-dict names], shape, dtype] list"),
    "checkpoint_weights": (
        lambda v: isinstance(v, dict) and all(_is_int(n) and n >= 0 for n in v.values()),
        "an object: function -> how many of its weights come from the checkpoint",
    ),
    "compile_seconds": ((lambda v: (_is_int(v) or isinstance(v, float)) and v >= 0), "a number of seconds"),
    "library_bytes": _int(0),
    "library_sha256": _HEX,
    "weights_bytes": _int(0),
    "weights_sha256": _HEX,
    DIGESTS: ((lambda v: isinstance(v, dict) and all(_HEX[0](d) for d in v.values())), "an object: field -> sha256"),
}


def _shown(value) -> str:
    text = json.dumps(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _check_fields(path: Path, meta: dict) -> None:
    """Every field present and of its type and range, then each as compiled (by its digest)."""

    def refuse(problem: str):
        raise ArtifactCorruptError(f"{path}: {problem}; {RECOMPILE_HINT}")

    for field, (valid, wanted) in FIELDS.items():
        if field not in meta and field in OPTIONAL:
            continue
        if field not in meta:
            refuse(f"{field} is missing")
        if not valid(meta[field]):
            refuse(f"{field} must be {wanted}, got {_shown(meta[field])}")
    recorded = meta[DIGESTS]
    unknown = [k for k in meta if k != DIGESTS and k not in recorded]
    if unknown:
        refuse(f"{', '.join(unknown)}: not written when it was compiled (no sha256 in {DIGESTS})")
    changed = [k for k, v in meta.items() if k != DIGESTS and recorded[k] != field_digest(v)]
    if changed:
        refuse(
            f"{', '.join(changed)} {'is' if len(changed) == 1 else 'are'} not what was compiled (the sha256 "
            f"recorded in {DIGESTS} differs): {META} was edited or damaged"
        )
    problem = index_problem(meta["weights_index"], meta["weights_bytes"])
    if problem:
        refuse(f"weights_index{problem}")
    for function, count in meta["checkpoint_weights"].items():
        if count > len(meta["weights_index"].get(function, [])):
            refuse(f"checkpoint_weights gives {function!r} {count} weights, weights_index fewer")
    if not holds_checkpoint(meta):  # a library without weights: the embeddings come when one is bound
        return
    if not meta["token_embeddings"]:
        refuse("token_embeddings is empty, in an artifact that holds weights")
    for function, number in meta["token_embeddings"]:
        entries = meta["weights_index"].get(function, [])
        if not 0 <= number < len(entries):
            refuse(f"token_embeddings names weight {number} of {function!r}, which has {len(entries)}")
        shape = entries[number][1]
        if len(shape) != 2 or shape[0] != meta["n_token"]:
            refuse(f"n_token is {meta['n_token']} but the token embedding has shape {shape}")


def holds_checkpoint(meta: dict) -> bool:
    """Whether the artifact carries a checkpoint's weights: compiled with them built in (no
    ``checkpoint_inputs``) or bound to them. A library-only artifact (``model/prebuilt.py``) does not."""
    inputs = meta["checkpoint_inputs"]
    return not inputs or any(meta["checkpoint_weights"].get(function, 0) for function in inputs)


def identity(out_dir: Path) -> tuple[str, int]:
    """``(sha256 of meta.json, sample rate)``, read without loading the artifact (it is checked when opened):
    the digest names the model its audio comes from, as meta.json records its library's and weights' sha256."""
    blob = (Path(out_dir) / META).read_bytes()
    return hashlib.sha256(blob).hexdigest(), int(json.loads(blob)["sample_rate"])


def read_meta(out_dir: Path) -> dict:
    """``meta.json`` of ``out_dir``, checked for format, for every field and for the files' sizes (cheap, always)."""
    out_dir = Path(out_dir)
    path = out_dir / META
    missing = [p.name for p in (path, *(out_dir / f for f in FILES)) if not p.is_file()]
    if missing:
        raise ArtifactMissingError(
            f"no compiled Kokoro artifact in {out_dir} (missing {' and '.join(missing)}); "
            "create one with `kokoro-tvm compile` or kokoro_tvm_ext.compile_kokoro(model, out_dir)"
        )
    try:
        meta = json.loads(path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise ArtifactCorruptError(f"{path} is corrupt ({err}); {RECOMPILE_HINT}") from err
    found = meta.get("format_version") if isinstance(meta, dict) else None
    if found != FORMAT_VERSION:
        by = "an older" if _is_int(found) and found < FORMAT_VERSION else "another"
        raise ArtifactCorruptError(
            f"{path} has artifact format {_shown(found)}, this kokoro-tvm-ext reads {FORMAT_VERSION} (it was "
            f"compiled by {by} version); {RECOMPILE_HINT}"
        )
    _check_fields(path, meta)
    for name in FILES:
        expected, size = meta[_key(name, "bytes")], (out_dir / name).stat().st_size
        if size != expected:
            raise ArtifactCorruptError(
                f"{out_dir / name} is {size} bytes but {META} records {expected}: the file is damaged or was "
                f"cut short (an interrupted copy?); {RECOMPILE_HINT}"
            )
    return meta


# Hashing the ~380 MB of files takes ~0.5 s, so a file's verified hash is remembered in
# a stamp beside it (``.verified.<file>``), keyed by its inode, size and mtime: a later
# load of the same file skips the hash, and a replaced or rewritten file is hashed again.
VERIFIED_STAMP = ".verified"


def verify_files(out_dir: Path, meta: dict) -> None:
    """Check ``kokoro.so`` and ``weights.bin`` against the sha256 in ``meta`` (after ``read_meta``)."""
    out_dir = Path(out_dir)
    for name in FILES:
        digest = remembered_sha256(out_dir / name, out_dir / f"{VERIFIED_STAMP}.{name}")
        recorded = str(meta.get(_key(name, "sha256")))
        if digest != recorded:
            raise ArtifactCorruptError(
                f"{out_dir / name} does not match the sha256 in {META} (got {digest[:16]}..., recorded "
                f"{recorded[:16]}...): the file was altered or damaged; {RECOMPILE_HINT}"
            )


def check_not_shared(out_dir: Path) -> None:
    """AssetError, naming the path, its owner and mode and the fix, if another user could change the artifact
    in ``out_dir``: it, a file in it (``kokoro.so``, the sha256 of it in ``meta.json`` and ``.verified.*``)
    or a directory above it. Not an ArtifactError: compiling again into the same place would not help."""
    out_dir = Path(out_dir)
    for path in (out_dir, *sorted(out_dir.iterdir())):
        problem = shared_problem(path)
        if problem:
            raise AssetError(f"refusing to load the artifact {out_dir}: {problem}")


def load_checked_meta(out_dir: Path) -> dict:
    """``read_meta`` plus the files' hashes, in a directory no other user can change: what loading an
    artifact needs before mapping its files."""
    meta = read_meta(out_dir)
    check_not_shared(out_dir)
    verify_files(out_dir, meta)
    return meta
