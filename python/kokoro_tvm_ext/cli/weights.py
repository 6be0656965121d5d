"""Kokoro checkpoints: convert a PyTorch .pth into .safetensors, which loads without torch.

The input is read as --weights reads it (hexgrad's grouped layout or flat names, `module.` prefixes,
float16/bfloat16 converted to float32, NaN and infinity refused); the output holds KModel's flat
state-dict names in float32. Converting a .pth needs PyTorch (the `compile` extra).

examples:
  kokoro-tvm weights convert kokoro-v1_0.pth kokoro-v1_0.safetensors
  kokoro-tvm say "Hallo." --weights kokoro-v1_0.safetensors -o hallo.wav"""

from __future__ import annotations

from pathlib import Path

from kokoro_tvm_ext.model.weights.files import SAFETENSORS, read_checkpoint
from kokoro_tvm_ext.support.cache import AtomicFiles, check_writable_file
from kokoro_tvm_ext.support.errors import InvalidInputError


def add_arguments(parser) -> None:
    actions = parser.add_subparsers(dest="action", metavar="ACTION", required=True)
    convert = actions.add_parser("convert", help="IN (.pth or .safetensors) -> OUT.safetensors")
    convert.add_argument("input", metavar="IN", help="a Kokoro checkpoint (.pth, .pt or .safetensors)")
    convert.add_argument("output", metavar="OUT", help="the .safetensors file to write")


def run(args) -> int:
    from safetensors.numpy import save_file

    out = Path(args.output)
    if out.suffix.lower() != SAFETENSORS:
        raise InvalidInputError(f"the output {out} must end in {SAFETENSORS}")
    check_writable_file(out)
    state = read_checkpoint(args.input)
    with AtomicFiles() as files:  # no partial OUT if anything fails
        save_file(state, files.temp(out), metadata={"converted_from": Path(args.input).name})
    size = sum(v.nbytes for v in state.values())
    print(f"wrote {out}: {len(state)} tensors, {size / 1e6:.0f} MB of float32")
    return 0
