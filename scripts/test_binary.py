"""Print the test executable(s) of a `cargo test --no-run --message-format=json` run read on standard input: the
one place scripts/test-portability.sh and scripts/test-aarch64.sh find the binary they run under emulation."""

import json
import sys

for line in sys.stdin:
    message = json.loads(line)
    if message.get("reason") == "compiler-artifact" and message["profile"]["test"] and message.get("executable"):
        print(message["executable"])
