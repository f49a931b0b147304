"""Regenerate chakra/schema/et_def_pb2.py from proto/et_def.proto.

Why our own step instead of plain `protoc --python_out`: protoc >= 5.26 stamps the module with a
runtime-version check that refuses any older protobuf runtime, which is the most common install
complaint about the official tools. We keep protoc's output but drop that check, so the module
imports under every runtime from 4.25 to 7.x (the builder API it uses exists since 3.20).

Usage: python tools/gen_proto.py [--check]   (needs grpcio-tools, in the `dev` extra)
"""

from __future__ import annotations

import re
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PROTO = ROOT / "proto" / "et_def.proto"
TARGET = ROOT / "chakra" / "schema" / "et_def_pb2.py"

HEADER = """# Generated from proto/et_def.proto by tools/gen_proto.py. DO NOT EDIT.
# protoc output with its runtime-version check removed, so any protobuf runtime >= 4.25 imports it.
# ruff: noqa
"""


def generate() -> str:
    """Return the module text protoc produces for the schema, made runtime-agnostic."""
    with tempfile.TemporaryDirectory() as tmp:
        cmd = [sys.executable, "-m", "grpc_tools.protoc", f"-I{PROTO.parent}", f"--python_out={tmp}", PROTO.name]
        subprocess.run(cmd, check=True)
        text = (Path(tmp) / "et_def_pb2.py").read_text()
    text = re.sub(r"^from google\.protobuf import runtime_version as _runtime_version\n", "", text, flags=re.M)
    text = re.sub(r"^_runtime_version\.ValidateProtobufRuntimeVersion\(\n(?:.*\n)*?\)\n", "", text, flags=re.M)
    text = re.sub(r"^# Protobuf Python Version: .*\n", "", text, flags=re.M)
    assert "_runtime_version" not in text, "protoc output changed shape; update tools/gen_proto.py"
    return HEADER + text


def main() -> int:
    text = generate()
    if "--check" in sys.argv:
        if TARGET.read_text() != text:
            print(f"{TARGET} is stale: run `python tools/gen_proto.py`", file=sys.stderr)
            return 1
        return 0
    TARGET.write_text(text)
    print(f"wrote {TARGET}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
