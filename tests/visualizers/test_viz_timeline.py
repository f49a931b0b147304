"""`chakra timeline`: Chrome trace JSON from simulator logs and from traces with start times.

The logs here are written in the format the chakra simulator documents (docs/simulator.md:
`issue|callback,<npu>,<time_ns>,<node_id>,<node_name>`, the name CSV-quoted when needed) and in
ASTRA-sim's own trace-line format (Workload.cc: `issue,sys->id={}, tick={}, node->id={},
node->name={}, node->type={}` through spdlog, whose default pattern prefixes `[time] [logger]
[level]`). There are no real log samples in shared/samples; where `chakra.sim` exists, the
end-to-end test below uses a log the simulator itself wrote.
"""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest

from chakra.errors import TraceFormatError
from chakra.io import read_traces, write_rank_traces
from chakra.schema import NodeType
from chakra.simlog import iter_records, looks_like_log
from chakra.trace import Trace, make_node
from chakra.visualizers.chrome_trace import load_schema
from chakra.visualizers.timeline import timeline_from_log, timeline_from_traces

SCHEMA = load_schema()


def _load(path: Path) -> dict:
    doc = json.loads(path.read_text())
    jsonschema.validate(doc, SCHEMA)
    return doc


def _x(doc: dict) -> list[dict]:
    return [e for e in doc["traceEvents"] if e["ph"] == "X"]


def _meta(doc: dict, name: str) -> dict[tuple[int, int], str]:
    return {
        (e["pid"], e["tid"]): e["args"].get("name", e["args"].get("sort_index"))
        for e in doc["traceEvents"]
        if e["ph"] == "M" and e["name"] == name
    }


def _write(path: Path, lines: list[str]) -> Path:
    path.write_text("".join(line + "\n" for line in lines))
    return path


def _all_reduce(samples_dir: Path) -> str:
    return str(samples_dir / "astrasim" / "all_reduce_8npus_1MB" / "all_reduce")


def test_log_of_the_all_reduce_sample_with_trace_lookup(samples_dir, tmp_path, run_cli):
    # What a simulator writes for ASTRA-sim's regression case: all 8 NPUs finish at 117,780 ns.
    lines = [f"issue,{r},0,{r},all_reduce_8npus_1MB" for r in range(8)]
    lines += [f"callback,{r},117780,{r},all_reduce_8npus_1MB" for r in range(8)]
    log = _write(tmp_path / "ar.csv", lines)
    out = tmp_path / "ar.json"
    res = run_cli("timeline", str(log), "--trace", _all_reduce(samples_dir), "-o", str(out))
    assert res.exit_code == 0, res.stderr
    doc = _load(out)
    events = _x(doc)
    assert len(events) == 8 and {e["pid"] for e in events} == set(range(8))
    assert all(e["ts"] == 0 and e["dur"] == pytest.approx(117.78) for e in events)  # µs, not ms
    assert all(e["tid"] == 3 and e["cat"] == "coll" for e in events)
    assert events[0]["args"] == {
        "node_id": 0,
        "type": "COMM_COLL_NODE",
        "is_cpu_op": False,
        "comm_type": "ALL_REDUCE",
        "comm_size": 1048576,
    }
    assert _meta(doc, "process_name") == {(r, 0): f"NPU {r}" for r in range(8)}
    assert set(_meta(doc, "thread_name").values()) == {"communication"}
    assert doc["displayTimeUnit"] == "ns"


def test_overlapping_ops_get_extra_lanes_and_names_from_the_log(tmp_path):
    log = _write(
        tmp_path / "o.csv",
        [
            "issue,0,0,1,aten::mm",
            "issue,0,100,2,aten::add",  # overlaps node 1 on compute -> lane 2 (tid 5)
            "issue,0,150,3,MEM_LOAD_NODE weights",
            'issue,0,200,4,"nccl:all_reduce, bucket 0"',
            "callback,0,300,2,aten::add",
            "callback,0,400,3,MEM_LOAD_NODE weights",
            "issue,0,500,5,aten::relu",  # lane 1 is still busy with node 1, lane 2 is free again
            "callback,0,1000,1,aten::mm",
            "callback,0,1200,5,aten::relu",
            'callback,0,2000,4,"nccl:all_reduce, bucket 0"',
        ],
    )
    result = timeline_from_log(log, tmp_path / "o.json")
    doc = _load(tmp_path / "o.json")
    ev = {e["args"]["node_id"]: e for e in _x(doc)}
    assert {k: v["tid"] for k, v in ev.items()} == {1: 2, 2: 5, 3: 1, 4: 3, 5: 5}
    assert ev[4]["name"] == "nccl:all_reduce, bucket 0" and ev[4]["cat"] == "coll"
    assert ev[3]["cat"] == "mem"
    assert ev[2]["ts"] == pytest.approx(0.1) and ev[2]["dur"] == pytest.approx(0.2)
    assert _meta(doc, "thread_name") == {
        (0, 1): "memory",
        (0, 2): "compute",
        (0, 3): "communication",
        (0, 5): "compute #2",
    }
    assert result.span_us == pytest.approx(2.0)
    assert result.warnings and "names only" in result.warnings[0]


def test_quoted_names_with_commas_quotes_and_newlines(tmp_path):
    log = tmp_path / "q.csv"
    log.write_text(
        'issue,1,0,7,"a, ""b""\nc"\ncallback,1,10,7,"a, ""b""\nc"\nissue,1,10,8,plain,with,commas\ncallback,1,20,8,x\n'
    )
    recs = list(iter_records(log))
    assert [(r[0], r[3], r[4], r[6]) for r in recs] == [
        ("issue", 7, 'a, "b"\nc', 1),
        ("callback", 7, 'a, "b"\nc', 3),
        ("issue", 8, "plain,with,commas", 5),
        ("callback", 8, "x", 6),
    ]
    timeline_from_log(log, tmp_path / "q.json")
    names = sorted(e["name"] for e in _x(_load(tmp_path / "q.json")))
    assert names == ['a, "b"\nc', "plain,with,commas"]


def test_astra_sim_log_lines_with_logger_prefix(tmp_path):
    prefix = "[2026-11-22 08:00:00.001] [workload] [debug] "
    record = "{},sys->id={}, tick={}, node->id={}, node->name={}, node->type={}"
    log = _write(
        tmp_path / "astra.log",
        [
            "[2026-11-22 08:00:00.000] [workload] [info] ring of node 0, id: 0 dimension: local total nodes in ring: 2",
            prefix + record.format("issue", 0, 0, 3, "fwd, mm", 4),
            prefix + record.format("issue", 1, 0, 4, "ar", 7),
            prefix + record.format("callback", 0, 2500, 3, "fwd, mm", 4),
            prefix + record.format("issue", 0, 2500, 5, "load", 2),
            prefix + record.format("callback", 0, 3000, 5, "load", 2),
            prefix + record.format("callback", 1, 117780, 4, "ar", 7),
            "sys[0] finished, 3000 cycles, exposed communication 0 cycles.",
        ],
    )
    assert looks_like_log(log)
    result = timeline_from_log(log, tmp_path / "a.json")
    assert result.processes == 2 and result.complete_events == 3 and not result.warnings
    ev = {e["args"]["node_id"]: e for e in _x(_load(tmp_path / "a.json"))}
    assert ev[3]["name"] == "fwd, mm" and ev[3]["tid"] == 2 and ev[3]["args"]["type"] == "COMP_NODE"
    assert ev[4]["pid"] == 1 and ev[4]["tid"] == 3 and ev[4]["dur"] == pytest.approx(117.78)
    assert ev[5]["tid"] == 1 and ev[5]["cat"] == "mem" and ev[5]["ts"] == pytest.approx(2.5)


@pytest.mark.parametrize(
    ("lines", "message", "line"),
    [
        (["issue,0,0,1,a", "callback,0,5,2,b"], "callback for node 2 on NPU 0 before its issue", 2),
        (["callback,0,5,1,a"], "before its issue", 1),
        (["issue,0,0,1,a", "callback,0,5,1,a", "callback,0,6,1,a"], "before its issue", 3),
        (["issue,0,0,1,a", "issue,0,x,2,b"], "must be integers", 2),
        (["issue,0,0,1,a", "this is not a record"], "cannot parse", 2),
        (["issue,0,0,1,a", "issue,0,1"], "expected 5 fields", 2),
        (["issue,0,10,1,a", "callback,0,5,1,a"], "before its issue at 10 ns", 2),
        (["issue,0,0,1,a", "issue,0,1,1,a"], "issued again", 2),
        (['issue,0,0,1,"never closed'], "quoted name is never closed", 1),
    ],
)
def test_bad_logs_name_the_line(tmp_path, lines, message, line):
    log = _write(tmp_path / "bad.csv", lines)
    with pytest.raises(TraceFormatError) as info:
        timeline_from_log(log, tmp_path / "bad.json")
    assert message in str(info.value) and f"line {line}" in str(info.value)
    assert not (tmp_path / "bad.json").exists()


def test_unknown_node_id_with_trace_and_cli_error_line(samples_dir, tmp_path, run_cli):
    log = _write(tmp_path / "u.csv", ["issue,0,0,0,all_reduce", "callback,0,10,0,all_reduce", "issue,3,0,42,ghost"])
    res = run_cli("timeline", str(log), "--trace", _all_reduce(samples_dir), "-o", str(tmp_path / "u.json"))
    assert res.exit_code == 1
    assert "line 3" in res.stderr and "unknown node id 42" in res.stderr
    assert "Traceback" not in res.stderr
    log = _write(tmp_path / "u2.csv", ["callback,0,10,42,ghost"])
    res = run_cli("timeline", str(log), "--trace", _all_reduce(samples_dir))
    assert res.exit_code == 1 and "line 1" in res.stderr and "unknown node id 42" in res.stderr


def _timed_ranks() -> list[Trace]:
    traces = []
    for rank in (0, 1):
        t = Trace(rank=rank)
        t.nodes.append(
            make_node(
                1, "fwd", NodeType.COMP_NODE, start_time_micros=100, duration_micros=50, attrs={"is_cpu_op": False}
            )
        )
        t.nodes.append(
            make_node(
                2,
                "allreduce",
                NodeType.COMM_COLL_NODE,
                data_deps=[1],
                start_time_micros=150,
                duration_micros=80,
                attrs={"comm_type": 0, "comm_size": 4096},
            )
        )
        t.nodes.append(
            make_node(3, "bwd", NodeType.COMP_NODE, data_deps=[1], start_time_micros=150, duration_micros=40)
        )
        t.nodes.append(
            make_node(4, "bwd2", NodeType.COMP_NODE, ctrl_deps=[3], start_time_micros=170, duration_micros=40)
        )
        traces.append(t)
    return traces


def test_trace_with_start_times_gives_the_recorded_timeline(tmp_path, run_cli):
    write_rank_traces(tmp_path / "run", _timed_ranks())
    out = tmp_path / "t.json"
    res = run_cli("timeline", str(tmp_path / "run"), "--flows", "-o", str(out))
    assert res.exit_code == 0, res.stderr
    doc = _load(out)
    ev = {(e["pid"], e["args"]["node_id"]): e for e in _x(doc)}
    assert len(ev) == 8
    assert ev[(1, 1)]["ts"] == 100 and ev[(1, 1)]["dur"] == 50 and ev[(1, 1)]["tid"] == 2
    assert ev[(0, 2)]["tid"] == 3 and ev[(0, 2)]["args"]["comm_type"] == "ALL_REDUCE"
    assert ev[(0, 4)]["tid"] == 5  # bwd2 starts while bwd still runs: second compute lane
    flows = [e for e in doc["traceEvents"] if e["ph"] in ("s", "f")]
    assert len(flows) == 2 * 3 * 2  # 3 dependencies per rank, a start and a finish each
    assert _meta(doc, "process_name") == {(0, 0): "rank 0", (1, 0): "rank 1"}


def test_trace_without_start_times_is_laid_out_by_dependencies(tmp_path):
    t = Trace(rank=0)
    t.nodes.append(make_node(1, "a", NodeType.COMP_NODE, duration_micros=10))
    t.nodes.append(make_node(2, "b", NodeType.COMP_NODE, data_deps=[1], duration_micros=5))
    t.nodes.append(make_node(3, "c", NodeType.COMP_NODE, data_deps=[1], duration_micros=7))
    t.nodes.append(make_node(4, "d", NodeType.COMP_NODE, data_deps=[2, 3], duration_micros=1))
    result = timeline_from_traces([t], tmp_path / "asap.json")
    ev = {e["args"]["node_id"]: e for e in _x(_load(tmp_path / "asap.json"))}
    assert {k: e["ts"] for k, e in ev.items()} == {1: 0, 2: 10, 3: 10, 4: 17}
    assert ev[2]["tid"] != ev[3]["tid"]
    assert result.span_us == 18 and "no start times" in result.warnings[0]


def test_stdout_output_is_one_json_document(samples_dir, tmp_path, run_cli):
    log = _write(tmp_path / "s.csv", ["issue,0,0,0,x", "callback,0,1500,0,x"])
    res = run_cli("timeline", str(log))
    assert res.exit_code == 0, res.stderr
    doc = json.loads(res.stdout)
    jsonschema.validate(doc, SCHEMA)
    assert _x(doc)[0]["dur"] == 1.5


def test_log_sniffing_tells_logs_from_traces(samples_dir, tmp_path):
    assert not looks_like_log(samples_dir / "astrasim" / "all_reduce_8npus_1MB" / "all_reduce.0.et")
    assert not looks_like_log(samples_dir / "et" / "official_small_chakra.0.json")
    assert looks_like_log(_write(tmp_path / "l.csv", ["issue,0,0,0,x"]))


def test_simulator_log_end_to_end(samples_dir, tmp_path, run_cli):
    import chakra.sim as sim

    log = tmp_path / "sim.csv"
    result = sim.simulate(_all_reduce(samples_dir), log_path=log)
    out = tmp_path / "sim.json"
    res = run_cli("timeline", str(log), "--trace", _all_reduce(samples_dir), "-o", str(out))
    assert res.exit_code == 0, res.stderr
    events = _x(_load(out))
    assert len(events) == 8
    assert {e["pid"] for e in events} == set(range(8))
    assert max(e["ts"] + e["dur"] for e in events) == pytest.approx(result.finish_ns / 1000)


def test_converted_pytorch_trace_timeline(samples_dir, tmp_path):
    import chakra.converters.pytorch as pytorch

    mlp = samples_dir / "pytorch" / "mlp"
    written = pytorch.convert([mlp / "et.0.json", mlp / "kineto.0.json"], tmp_path / "mlp").paths
    traces = read_traces([str(p) for p in written])
    result = timeline_from_traces(traces, tmp_path / "mlp.json")
    doc = _load(tmp_path / "mlp.json")
    assert result.processes == 1
    # The converter's filler nodes (gap, queue) are not drawn: their time is inside their parents.
    fillers = sum(1 for n in traces[0].nodes if any(a.name in ("gap_of", "queue_of") for a in n.attr))
    assert fillers and doc["otherData"]["filler_nodes_not_drawn"] == fillers
    assert len(_x(doc)) == len(traces[0].nodes) - fillers
    starts = sorted(n.start_time_micros for n in traces[0].nodes if n.start_time_micros)
    assert min(e["ts"] for e in _x(doc)) == starts[0]


def test_official_key_value_spelling_and_flows_need_a_trace(tmp_path, run_cli):
    # The spelling the official chakra_timeline_visualizer splits on "=" (docs/chakra-format.md §6.3).
    log = _write(
        tmp_path / "k.log",
        [
            "issue,npu_id=1,cycle=2000,node_id=9,node_name=COMP_NODE_x",
            "callback,npu_id=1,cycle=5000,node_id=9,node_name=x",
        ],
    )
    result = timeline_from_log(log, tmp_path / "k.json")
    ev = _x(_load(tmp_path / "k.json"))
    assert result.processes == 1 and ev[0]["pid"] == 1 and ev[0]["ts"] == 2 and ev[0]["dur"] == 3
    assert ev[0]["name"] == "COMP_NODE_x" and ev[0]["tid"] == 2
    res = run_cli("timeline", str(log), "--flows", "-o", str(tmp_path / "f.json"))
    assert res.exit_code == 1 and "--trace" in res.stderr


def test_op_never_called_back_is_named_by_its_issue_line(tmp_path):
    log = _write(tmp_path / "open.csv", ["issue,0,0,1,a", "issue,0,5,2,b", "callback,0,10,1,a"])
    result = timeline_from_log(log, tmp_path / "o.json")
    assert result.complete_events == 1
    assert any("node 2 on NPU 0 (line 2)" in w for w in result.warnings), result.warnings
