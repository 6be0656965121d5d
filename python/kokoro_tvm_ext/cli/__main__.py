"""`python -m kokoro_tvm_ext.cli`: the `kokoro-tvm` command."""

from . import console_main

console_main()
