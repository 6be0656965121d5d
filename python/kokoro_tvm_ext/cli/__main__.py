"""`python -m kokoro_tvm_ext.cli`: the `kokoro-tvm` command."""

from kokoro_tvm_ext.cli import console_main

console_main()
