"""The `chakra` command: stats/validate/jsonize/dejsonize behave, and user errors are one line."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import orjson

from chakra.io import write_trace
from chakra.schema import NodeType
from chakra.trace import Trace, make_node

ALL_REDUCE = ("astrasim", "all_reduce_8npus_1MB", "all_reduce")


def test_help_lists_every_subcommand_in_order_and_every_one_loads():
    # In a subprocess with a wide terminal: any module that fails to import would be reported on stderr.
    import importlib
    import os

    env = {**os.environ, "COLUMNS": "200"}
    proc = subprocess.run([sys.executable, "-m", "chakra.cli", "--help"], capture_output=True, text=True, env=env)
    assert proc.returncode == 0 and proc.stderr == ""
    from chakra.cli import COMMANDS

    positions = []
    for name, (module, line) in COMMANDS.items():
        assert f"{name} " in proc.stdout and line in proc.stdout, name
        row = re.search(rf"^\W*{name} ", proc.stdout, re.M)  # the command's own row in the table
        assert row is not None, name
        positions.append(row.start())
        # --help lists commands without importing them, so load each one here.
        assert hasattr(importlib.import_module(f"chakra.commands.{module}"), "register"), module
    assert positions == sorted(positions)  # the order of the table: convert, validate, stats, ...
    assert list(COMMANDS)[:3] == ["convert", "validate", "stats"]


def test_version_imports_no_subcommand():
    # What `chakra --version` imports decides its start-up time: no converter, no subcommand,
    # no numpy/protobuf/msgspec.
    script = (
        "import sys\n"
        "sys.argv = ['chakra', '--version']\n"
        "from chakra.cli import main\n"
        "try:\n    main()\nexcept SystemExit:\n    pass\n"
        "heavy = [m for m in sys.modules if m.startswith(('chakra.converters', 'chakra.commands', 'numpy', "
        "'google.protobuf', 'msgspec'))]\n"
        "print('HEAVY', heavy)\n"
    )
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    from chakra import __version__

    assert proc.stdout.splitlines() == [f"chakra {__version__}", "HEAVY []"]
    for args in (["--help"], ["validate", "--help"], ["convert", "--help"]):
        script_help = script.replace("'--version'", ", ".join(repr(a) for a in args))
        proc = subprocess.run([sys.executable, "-c", script_help], capture_output=True, text=True)
        heavy = proc.stdout.splitlines()[-1]
        assert "numpy" not in heavy and "protobuf" not in heavy and "msgspec" not in heavy, (args, heavy)
        if args[0] != "convert":  # `convert --help` reads the plugins' declarations, nothing else
            assert "chakra.converters" not in heavy, (args, heavy)


def test_stats_json_shape(run_cli, samples_dir):
    result = run_cli("stats", str(samples_dir.joinpath(*ALL_REDUCE)), "--json", "-q")
    assert result.exit_code == 0
    data = orjson.loads(result.stdout)
    assert sorted(data["ranks"], key=int) == [str(r) for r in range(8)]
    r0 = data["ranks"]["0"]
    assert r0["nodes"] == 1 and r0["by_type"] == {"COMM_COLL_NODE": 1}
    assert r0["collectives"] == {"ALL_REDUCE": {"count": 1, "bytes": 1048576}}
    assert r0["p2p"] == {} and r0["compute_us"] == 0 and r0["critical_path_us"] == 0
    assert data["summary"]["collectives"]["ALL_REDUCE"] == {"count": 8, "bytes": 8 * 1048576}


def test_stats_critical_path(run_cli, tmp_path):
    t = Trace(rank=0)
    t.nodes = [
        make_node(0, "a", NodeType.COMP_NODE, duration_micros=10),
        make_node(1, "b", NodeType.COMP_NODE, duration_micros=5, data_deps=[0]),
        make_node(2, "c", NodeType.COMP_NODE, duration_micros=30),
        make_node(3, "d", NodeType.COMP_NODE, duration_micros=1, ctrl_deps=[1, 2]),
    ]
    write_trace(tmp_path / "cp.0.et", t)
    data = orjson.loads(run_cli("stats", str(tmp_path / "cp"), "--json").stdout)
    assert data["ranks"]["0"]["compute_us"] == 46
    assert data["ranks"]["0"]["critical_path_us"] == 31


def test_validate_exit_codes(run_cli, samples_dir):
    ok = run_cli("validate", str(samples_dir.joinpath(*ALL_REDUCE)), "--json")
    assert ok.exit_code == 0 and orjson.loads(ok.stdout)["ok"] is True
    bad = run_cli("validate", str(samples_dir / "et" / "official_small_chakra.0.json"), "--json")
    assert bad.exit_code == 1
    report = orjson.loads(bad.stdout)
    assert report["counts"]["error:comm-missing-attr"] == 6  # its 3 collectives carry no comm_type/comm_size


def test_jsonize_dejsonize_round_trip(run_cli, samples_dir, tmp_path):
    src = samples_dir.joinpath(*ALL_REDUCE).parent / "all_reduce.5.et"
    assert run_cli("jsonize", str(src), "-o", str(tmp_path / "r.5.json"), "-q").exit_code == 0
    assert run_cli("dejsonize", str(tmp_path / "r.5.json"), "-o", str(tmp_path / "r.5.et"), "-q").exit_code == 0
    assert (tmp_path / "r.5.et").read_bytes() == src.read_bytes()
    # PREFIX in, PREFIX out
    assert run_cli("jsonize", str(samples_dir.joinpath(*ALL_REDUCE)), "-o", str(tmp_path / "all"), "-q").exit_code == 0
    assert len(list(tmp_path.glob("all.*.json"))) == 8


def run_subprocess(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "chakra.cli", *args], capture_output=True, text=True)


def test_corrupt_inputs_give_one_line_and_no_output(tmp_path):
    truncated = tmp_path / "trunc.0.et"
    t = Trace(nodes=[make_node(i, "n", NodeType.COMP_NODE) for i in range(5)])
    write_trace(truncated, t)
    truncated.write_bytes(truncated.read_bytes()[:-2])
    garbage = tmp_path / "garbage.0.et"
    garbage.write_bytes(b"\xff" * 20)
    badjson = tmp_path / "bad.0.json"
    badjson.write_text('{"format": "chakra-et-json/1", "nodes": [')
    for path in (truncated, garbage, badjson):
        out = tmp_path / "out.0.json"
        proc = run_subprocess("jsonize", str(path), "-o", str(out))
        assert proc.returncode == 1, proc.stderr
        lines = [line for line in proc.stderr.splitlines() if line.strip()]
        assert len(lines) == 1 and str(path.name) in lines[0], proc.stderr
        assert "Traceback" not in proc.stderr
        assert not out.exists()
        assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".")) == []
    proc = run_subprocess("jsonize", str(truncated), "-o", str(tmp_path / "o.json"))
    assert "byte offset" in proc.stderr and "message 5" in proc.stderr


def test_debug_shows_traceback(tmp_path):
    bad = tmp_path / "g.0.et"
    bad.write_bytes(b"\xff" * 20)
    proc = run_subprocess("--debug", "stats", str(bad))
    assert proc.returncode != 0 and "Traceback" in proc.stderr


def test_usage_error_exit_code():
    assert run_subprocess("stats").returncode == 2
    assert Path(sys.executable).exists()


def test_jsonize_prefix_output_and_dejsonize_refuses_non_json(run_cli, samples_dir, tmp_path):
    prefix = samples_dir.joinpath(*ALL_REDUCE)
    # With several inputs -o is a PREFIX, even when typed with a .json suffix.
    assert run_cli("jsonize", str(prefix), "-o", str(tmp_path / "j.json"), "-q").exit_code == 0
    assert sorted(p.name for p in tmp_path.glob("j.*.json")) == [f"j.{r}.json" for r in range(8)]
    text = tmp_path / "text.0.json"
    text.write_text("hello, not json")
    res = run_cli("dejsonize", str(text), "-o", str(tmp_path / "t.0.et"))
    assert res.exit_code == 1 and "not a JSON trace" in res.stderr
    assert not (tmp_path / "t.0.et").exists()


def test_stats_counts_compute_without_is_cpu_op_as_device_work(run_cli, samples_dir, tmp_path):
    # ASTRA-sim text workloads give compute nodes no is_cpu_op; simulators run them as device work.
    text = samples_dir / "astrasim" / "text_workloads" / "MLP_ModelParallel.txt"
    assert run_cli("convert", "text", str(text), "--npus", "2", "-o", str(tmp_path / "mlp"), "-q").exit_code == 0
    res = run_cli("stats", str(tmp_path / "mlp"), "--json")
    rank0 = orjson.loads(res.stdout)["ranks"]["0"]
    assert rank0["cpu_compute_us"] == 0
    assert rank0["gpu_compute_us"] == rank0["compute_us"] == 195_206
