"""Bad input to the core readers: one `error:` line naming file and place, exit 1, bounded memory.

Inputs are the bundled real samples, damaged the way the fuzzer found them damaged: corrupt and
truncated gzip, length prefixes claiming exabytes, decompression bombs, out-of-range and NaN
values in valid protobufs, NaN/huge/deeply nested simulator configs, and a send/recv deadlock.
"""

from __future__ import annotations

import gzip
import json
import math
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from chakra.compression import RATIO_ENV
from chakra.errors import MAX_MESSAGE, ChakraError, TraceFormatError
from chakra.io import encode_varint, read_input_bytes, read_trace, write_trace

REPO = Path(__file__).resolve().parents[2]


def all_reduce(samples_dir: Path, rank: int = 0) -> Path:
    return samples_dir / "astrasim" / "all_reduce_8npus_1MB" / f"all_reduce.{rank}.et"


def one_error_line(result, *needles: str) -> str:
    assert result.exit_code == 1, (result.exit_code, result.stdout, result.stderr)
    lines = [x for x in result.stderr.splitlines() if x.strip()]
    assert len(lines) == 1 and lines[0].startswith("error:"), result.stderr
    assert "Traceback" not in result.stderr
    for needle in needles:
        assert needle in lines[0], (needle, lines[0])
    return lines[0]


# --------------------------------------------------------------------------------------------
# gzip


def damaged_gzips(samples_dir: Path, tmp_path: Path) -> dict[str, Path]:
    """The real all_reduce.0.et gzipped, then: magic only, truncated, corrupt deflate, bad CRC."""
    data = gzip.compress(all_reduce(samples_dir).read_bytes(), mtime=0)
    variants = {
        "magic-only": data[:2],
        "truncated": data[: len(data) // 2],
        "bad-method": data[:2] + b"\x07" + data[3:],
        "bad-crc": data[:-8] + bytes(b ^ 0xFF for b in data[-8:-4]) + data[-4:],
        "bad-deflate": data[:10] + b"\xff\xff\xff" + data[13:],
    }
    out = {}
    for name, blob in variants.items():
        p = tmp_path / f"{name}.0.et"
        p.write_bytes(blob)
        out[name] = p
    return out


@pytest.mark.parametrize("command", ["validate", "jsonize", "simulate", "stats"])
def test_corrupt_gzip_is_one_error_naming_file_and_offset(samples_dir, tmp_path, run_cli, command):
    for name, path in damaged_gzips(samples_dir, tmp_path).items():
        extra = {"jsonize": ["-o", str(tmp_path / "o.0.json")], "simulate": ["--log", str(tmp_path / "s.csv")]}
        result = run_cli(command, str(path), *extra.get(command, []))
        line = one_error_line(result, str(path), "byte offset")
        assert "gzip" in line, (name, line)
        assert "Aborted" not in result.stderr
        assert not (tmp_path / "o.0.json").exists() and not (tmp_path / "s.csv").exists()


def test_dejsonize_corrupt_gzip(samples_dir, tmp_path, run_cli):
    official = samples_dir / "et" / "official_small_chakra.0.json"
    data = gzip.compress(official.read_bytes(), mtime=0)
    bad = tmp_path / "o.0.json.gz"
    bad.write_bytes(data[:-8] + b"\0\0\0\0" + data[-4:])
    one_error_line(run_cli("dejsonize", str(bad), "-o", str(tmp_path / "x.0.et")), str(bad), "CRC")
    assert not (tmp_path / "x.0.et").exists()


def test_feeder_names_the_input_and_leaves_no_temp_file(samples_dir, tmp_path, monkeypatch):
    import tempfile

    from chakra.feeder import ETFeeder

    scratch = tmp_path / "scratch"
    scratch.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))
    for path in damaged_gzips(samples_dir, tmp_path).values():
        with pytest.raises(TraceFormatError) as info:
            ETFeeder(path)
        assert str(path) in str(info.value) and "chakra-feeder-" not in str(info.value)
        assert list(scratch.iterdir()) == []


def test_real_gzip_samples_pass_the_limits(samples_dir):
    # the real samples compress up to 27x; the ratio limit (200x) must not touch them
    for p in [*samples_dir.glob("kineto/*.gz"), *samples_dir.glob("pytorch_et/*.json.gz")]:
        assert len(read_input_bytes(p)) > p.stat().st_size


# --------------------------------------------------------------------------------------------
# .et framing


@pytest.mark.parametrize("claim", [1 << 36, (1 << 64) - 1, 1 << 70])
def test_length_prefix_claiming_too_much(samples_dir, tmp_path, run_cli, claim):
    real = all_reduce(samples_dir).read_bytes()
    bad = tmp_path / "big.0.et"
    bad.write_bytes(encode_varint(claim) + real[1:])  # the metadata's 1-byte length replaced
    one_error_line(run_cli("validate", str(bad)), str(bad), "message 0", "byte offset 0")


def test_length_prefix_past_end_of_plain_file(samples_dir, tmp_path):
    real = all_reduce(samples_dir).read_bytes()
    bad = tmp_path / "cut.0.et"
    bad.write_bytes(real + encode_varint(1 << 30) + b"x" * 10)
    with pytest.raises(TraceFormatError, match=r"message of 1073741824 bytes but only 10 remain"):
        read_trace(bad)


# --------------------------------------------------------------------------------------------
# decompression bombs: a child process, its peak RSS measured


def _child(args: list[str], env: dict[str, str] | None = None) -> tuple[int, str, int]:
    """Run `chakra ARGS` in a child; (exit code, stderr, peak RSS in MB of the child)."""
    # VmHWM is the peak RSS of this process image only (ru_maxrss would include the forking
    # parent's, which Linux carries across exec)
    code = textwrap.dedent(
        """
        import atexit, sys
        def peak():
            with open("/proc/self/status") as f:
                kb = [line.split()[1] for line in f if line.startswith("VmHWM")]
            sys.stderr.write("\\nPEAK_RSS_KB %s\\n" % kb[0])
        atexit.register(peak)
        from chakra.cli import main
        sys.argv = ["chakra"] + sys.argv[1:]
        main()
        """
    )
    proc = subprocess.run(
        [sys.executable, "-c", code, *args],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, **(env or {})},
    )
    peak = [int(x.split()[1]) for x in proc.stderr.splitlines() if x.startswith("PEAK_RSS_KB")]
    return proc.returncode, proc.stderr, (peak[-1] // 1024 if peak else -1)


@pytest.fixture(scope="module")
def bombs(tmp_path_factory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("bombs")
    zeros = d / "zeros.0.et"
    zeros.write_bytes(gzip.compress(bytes(256 << 20), 6, mtime=0))  # ~250 KB -> 256 MiB
    spaces = d / "spaces.0.json"
    spaces.write_bytes(gzip.compress(b"{" + b" " * (256 << 20), 6, mtime=0))
    return {"zeros": zeros, "spaces": spaces}


@pytest.mark.parametrize(
    ("name", "command"),
    [("zeros", ["validate"]), ("zeros", ["simulate"]), ("spaces", ["dejsonize"]), ("spaces", ["validate"])],
)
def test_decompression_bomb_refused_early(bombs, tmp_path, name, command):
    path = bombs[name]
    args = [*command, str(path)]
    if command == ["dejsonize"]:
        args += ["-o", str(tmp_path / "x.0.et")]
    rc, err, peak_mb = _child(args)
    assert rc == 1 and "Traceback" not in err, err
    errors = [x for x in err.splitlines() if x.startswith("error:")]
    assert len(errors) == 1 and str(path) in errors[0], err
    assert RATIO_ENV in errors[0] or "empty (zero-length) messages" in errors[0], errors[0]
    # 256 MiB of zeros is 256 million empty nodes (tens of GB) if read; refused, it costs little
    assert 0 < peak_mb < 400, peak_mb


def test_ratio_limit_can_be_lifted(tmp_path):
    spaces = tmp_path / "s.0.json"
    spaces.write_bytes(gzip.compress(b"{" + b" " * (12 << 20), 6, mtime=0))
    with pytest.raises(TraceFormatError, match=RATIO_ENV):
        read_input_bytes(spaces)
    os.environ[RATIO_ENV] = "0"
    try:
        assert len(read_input_bytes(spaces)) == (12 << 20) + 1
    finally:
        del os.environ[RATIO_ENV]


# --------------------------------------------------------------------------------------------
# out-of-range and non-finite values in valid protobufs


def _edited(samples_dir: Path, tmp_path: Path, edit) -> Path:
    trace = read_trace(all_reduce(samples_dir))
    edit(trace.nodes[0])
    out = tmp_path / "t.0.et"
    write_trace(out, trace)
    return out


def _set_attr(node, name: str, **arm) -> None:
    for a in list(node.attr):
        if a.name == name:
            node.attr.remove(a)
    node.attr.add(name=name, **arm)


@pytest.mark.parametrize(
    ("edit", "needle"),
    [
        (lambda n: setattr(n, "id", (1 << 64) - 1), "id 18446744073709551615 is out of range"),
        (lambda n: setattr(n, "duration_micros", 1 << 63), "duration_micros 9223372036854775808"),
        (lambda n: n.data_deps.append(1 << 63), "data_deps names id 9223372036854775808"),
        (lambda n: _set_attr(n, "comm_size", uint64_val=(1 << 64) - 1), "'comm_size' = 18446744073709551615"),
        (lambda n: _set_attr(n, "comm_type", double_val=math.nan), "'comm_type' is nan"),
        (lambda n: _set_attr(n, "comm_size", double_val=math.inf), "'comm_size' is inf"),
    ],
)
def test_simulate_refuses_out_of_range_values(samples_dir, tmp_path, run_cli, edit, needle):
    path = _edited(samples_dir, tmp_path, edit)
    one_error_line(run_cli("simulate", str(path), "--log", str(tmp_path / "s.csv")), str(path), needle)
    assert not (tmp_path / "s.csv").exists()


def test_validate_reports_nan_attributes_without_crashing(samples_dir, tmp_path, run_cli):
    path = _edited(samples_dir, tmp_path, lambda n: _set_attr(n, "comm_size", double_val=math.nan))
    result = run_cli("validate", str(path), "--json")
    assert result.exit_code == 1 and "Traceback" not in result.stderr
    report = json.loads(result.stdout)
    assert report["error_count"] >= 1


# --------------------------------------------------------------------------------------------
# cross-rank deadlock


def test_validate_reports_the_deadlock_simulate_hits(tmp_path, run_cli):
    # Built with the workload DSL (docs/dsl.md), the documented producer of send/recv pairs:
    # rank 0 sends to 1, then 1 sends back. Then, through the JSON form, rank 0's send is made to
    # wait for its receive: each rank now waits for the other.
    spec = tmp_path / "ring.yaml"
    spec.write_text(
        "ranks: 2\nname: ring\nops:\n"
        "  - compute: {id: c, rank: all, name: warmup, flops: 1e9}\n"
        "  - send: {id: a, src: 0, dst: 1, size: 1MiB, after: [c]}\n"
        "  - send: {id: b, src: 1, dst: 0, size: 1MiB, after: [a]}\n"
    )
    assert run_cli("generate", "spec", str(spec), "-o", str(tmp_path / "ring")).exit_code == 0
    assert run_cli("validate", str(tmp_path / "ring")).exit_code == 0
    assert run_cli("jsonize", str(tmp_path / "ring.0.et"), "-o", str(tmp_path / "r.0.json")).exit_code == 0
    doc = json.loads((tmp_path / "r.0.json").read_text())
    by_type = {n.get("type"): n for n in doc["nodes"]}
    send, recv = by_type["COMM_SEND_NODE"], by_type["COMM_RECV_NODE"]
    recv["data_deps"], send["data_deps"] = send["data_deps"], [recv["id"]]
    (tmp_path / "r.0.json").write_text(json.dumps(doc))
    assert run_cli("dejsonize", str(tmp_path / "r.0.json"), "-o", str(tmp_path / "ring.0.et")).exit_code == 0

    result = run_cli("validate", str(tmp_path / "ring"), "--json")
    assert result.exit_code == 1
    findings = [f for f in json.loads(result.stdout)["findings"] if f["code"] == "deadlock"]
    assert len(findings) == 1
    message = findings[0]["message"]
    assert "ranks [0, 1]" in message and f"rank 0 send {send['id']} waits for rank 0 recv {recv['id']}" in message
    sim = run_cli("simulate", str(tmp_path / "ring"))
    one_error_line(sim, "deadlock")


# --------------------------------------------------------------------------------------------
# simulator configs, comm groups, sim logs, JSON form


def _network(samples_dir: Path) -> Path:
    return samples_dir / "astrasim" / "configs_rt_template" / "network_cfg.yml"


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("latency: [ .nan ]", "'latency' is nan"),
        ("latency: [ 1.0e+308 ]", "'latency' is 1e+308"),
        ("latency: [ " + "9" * 5000 + " ]", "thousands of digits"),
        ("latency: " + "[" * 5000 + "1" + "]" * 5000, "nested too deeply"),
    ],
    ids=["nan", "huge-float", "5000-digits", "deep-nesting"],
)
def test_bad_network_config(samples_dir, tmp_path, run_cli, text, needle):
    lines = [x for x in _network(samples_dir).read_text().splitlines() if not x.startswith("latency")]
    cfg = tmp_path / "network.yml"
    cfg.write_text("\n".join([*lines, text]) + "\n")
    prefix = str(all_reduce(samples_dir).parent / "all_reduce")
    one_error_line(run_cli("simulate", prefix, "--network", str(cfg)), str(cfg), needle)


@pytest.mark.parametrize(
    ("value", "needle"),
    [
        ("9223372036854775807", "out of range"),
        ("18446744073709551616", "out of range"),
        ("9" * 5000, "thousands of digits"),
        ("[" * 100000 + "]" * 100000, "nested too deeply"),
    ],
    ids=["int64-max", "2^64", "5000-digits", "deep-nesting"],
)
def test_bad_system_config(samples_dir, tmp_path, run_cli, value, needle):
    text = (samples_dir / "astrasim" / "configs_rt_template" / "system_cfg.json").read_text()
    doc = json.loads(text)
    cfg = tmp_path / "system.json"
    cfg.write_text(
        json.dumps(doc).replace(
            f'"preferred-dataset-splits": {doc["preferred-dataset-splits"]}', f'"preferred-dataset-splits": {value}'
        )
    )
    prefix = str(all_reduce(samples_dir).parent / "all_reduce")
    one_error_line(run_cli("simulate", prefix, "--system", str(cfg)), str(cfg), needle)


def test_simlog_with_an_overlong_number(samples_dir, tmp_path, run_cli):
    prefix = str(all_reduce(samples_dir).parent / "all_reduce")
    log = tmp_path / "sim.csv"
    assert run_cli("simulate", prefix, "--log", str(log)).exit_code == 0
    lines = log.read_text().splitlines()
    fields = lines[-1].split(",")
    fields[2] = "9" * 5000
    lines[-1] = ",".join(fields)
    log.write_text("\n".join(lines) + "\n")
    one_error_line(run_cli("timeline", str(log), "-o", str(tmp_path / "tl.json")), str(log))
    assert not (tmp_path / "tl.json").exists()


def test_official_json_wrong_types_name_the_json_path(samples_dir, tmp_path, run_cli):
    doc = json.loads((samples_dir / "et" / "official_small_chakra.0.json").read_text())
    for i, (key, value, needle) in enumerate(
        [
            ("Id", {"a": 1}, "workload_graph[1].Id"),
            ("Id", -3, "workload_graph[1].Id"),
            ("data_deps", "216", "workload_graph[1].data_deps"),
            ("runtime", "fast", "workload_graph[1].runtime"),
            ("Id", 1 << 64, "workload_graph[1]"),
        ]
    ):
        bad = json.loads(json.dumps(doc))
        bad["workload_graph"][1][key] = value
        path = tmp_path / f"bad{i}.0.json"
        path.write_text(json.dumps(bad))
        one_error_line(run_cli("dejsonize", str(path), "-o", str(tmp_path / "o.0.et")), str(path), needle)
        assert not (tmp_path / "o.0.et").exists()


def test_our_json_form_out_of_range_attr(samples_dir, tmp_path, run_cli):
    assert run_cli("jsonize", str(all_reduce(samples_dir)), "-o", str(tmp_path / "a.0.json")).exit_code == 0
    doc = json.loads((tmp_path / "a.0.json").read_text())
    doc["nodes"][0]["attr"][0] = {"name": "comm_size", "int64_val": 1 << 63}
    (tmp_path / "a.0.json").write_text(json.dumps(doc))
    one_error_line(
        run_cli("dejsonize", str(tmp_path / "a.0.json"), "-o", str(tmp_path / "b.0.et")),
        "at nodes/0/attr/0/int64_val",
    )


def test_overlong_error_messages_are_cut_in_one_place():
    exc = TraceFormatError("f.et", "bad value " + "A" * 100000 + " end")
    text = str(exc)
    assert len(text) < MAX_MESSAGE + 60 and text.startswith("f.et: bad value AAA") and text.endswith(" end")
    assert "characters cut" in text
    assert str(ChakraError("short")) == "short"
