"""The official linked trace (ET+, `chakra_trace_link` output) as input, against our own linking.

tests/data/samples/pytorch_etplus/ holds the official tool's output for both ranks of
pytorch/ddp2mem (SOURCES.md says how it was made). Converting it must give what converting the
ET + Kineto pair it was made from gives, except what the ET+ no longer holds (docs/pytorch.md):
the span of ProfilerStep#N (the official linker skips it) and with it the step's own `gap`
nodes and the `idle` time around it.
"""

from __future__ import annotations

import gzip
from collections import Counter
from pathlib import Path

import orjson
import pytest

from chakra.converters.pytorch import Options, convert_files
from chakra.converters.pytorch.etplus import is_etplus
from chakra.io import read_traces
from chakra.schema import NodeType
from chakra.schema.attrs import get_attr
from chakra.validate import validate_traces


def _keyed(trace):
    """node id -> (name, type, start relative to the first kept node, duration) of every node but
    ProfilerStep#N, its gap nodes and idle nodes (the ET+ does not hold the step's span)."""
    steps = {n.id for n in trace.nodes if n.name.startswith("ProfilerStep#")}
    kept = [
        n for n in trace.nodes
        if n.id not in steps and n.name != "idle" and not (n.name == "gap" and get_attr(n, "gap_of") in steps)
    ]  # fmt: skip
    t0 = min(n.start_time_micros for n in kept)
    return {n.id: (n.name, n.type, n.start_time_micros - t0, n.duration_micros) for n in kept}


def _edges(trace, keys):
    out = Counter()
    for n in trace.nodes:
        if n.id not in keys:
            continue
        for kind, deps in (("ctrl", n.ctrl_deps), ("data", n.data_deps)):
            for d in deps:
                if d in keys:
                    out[(kind, keys[d], keys[n.id])] += 1
    return out


@pytest.fixture(scope="module")
def pair(samples_dir, tmp_path_factory):
    out = tmp_path_factory.mktemp("etplus")
    run = samples_dir / "pytorch" / "ddp2mem"
    plus = samples_dir / "pytorch_etplus"
    keep = Options(overhead="keep")  # recorded durations on both sides: the linking is compared
    own = convert_files(sorted(run.glob("et.*.json.gz")), sorted(run.glob("kineto.*.json.gz")), out / "own", keep)
    linked = convert_files(sorted(plus.glob("ddp2mem_etplus.*.json.gz")), [], out / "plus", keep)
    return out, own, linked


def test_etplus_gives_the_same_nodes_and_dependencies_as_our_linking(pair):
    out, own_summary, plus_summary = pair
    own = read_traces([out / "own"])
    plus = read_traces([out / "plus"])
    assert [t.rank for t in plus] == [0, 1]
    for a, b, sa, sb in zip(own, plus, own_summary, plus_summary):
        assert sb["link_rate"] > 0.99 and sb["linked"] == sa["linked"] == 1043
        ka, kb = _keyed(a), _keyed(b)
        # every operator, collective and queue node: same name, type, relative start and duration
        assert len(ka) > 1000
        assert Counter(ka.values()) == Counter(kb.values())
        # the collectives: same type, size and group, in the same order
        colls = [
            [(get_attr(n, "comm_type"), get_attr(n, "comm_size"), get_attr(n, "pg_name")) for n in t.nodes
             if n.type == NodeType.COMM_COLL_NODE]
            for t in (a, b)
        ]  # fmt: skip
        assert colls[0] == colls[1] and len(colls[0]) == 4
        # dependencies between those nodes: the same edges (ctrl and data)
        ea, eb = _edges(a, ka), _edges(b, kb)
        assert sum(ea.values()) > 1500
        assert ea == eb, ((ea - eb), (eb - ea))
        # what differs is only the step's own span: its gap nodes
        names_a = Counter(n.name for n in a.nodes)
        names_b = Counter(n.name for n in b.nodes)
        assert set((names_a - names_b) + (names_b - names_a)) <= {"gap", "idle"}
        assert abs(len(a.nodes) - len(b.nodes)) <= 8
    report = validate_traces(plus)
    assert report.ok, report


def test_older_et_plus_keys(samples_dir, tmp_path):
    """PARAM-era `trace_link.py` (mlcommons/chakra a76b4a6) wrote `dur` where the current tool writes
    `inclusive_dur`, and neither `exclusive_dur` nor `inter_thread_dep`: the sample rewritten to
    those keys converts to the same trace."""
    src = samples_dir / "pytorch_etplus" / "ddp2mem_etplus.0.json.gz"
    doc = orjson.loads(gzip.decompress(src.read_bytes()))
    for n in doc["nodes"]:
        if "inclusive_dur" in n:
            n["dur"] = n.pop("inclusive_dur")
        n.pop("exclusive_dur", None)
        n.pop("inter_thread_dep", None)
    old = tmp_path / "et_plus.0.json"
    old.write_bytes(orjson.dumps(doc))
    assert is_etplus(old.read_bytes()) and not is_etplus((samples_dir / "pytorch" / "mlp" / "et.0.json").read_bytes())
    convert_files([old], [], tmp_path / "old")
    convert_files([src], [], tmp_path / "new")
    a, b = read_traces([tmp_path / "old"])[0], read_traces([tmp_path / "new"])[0]
    assert [n.SerializeToString() for n in a.nodes] == [n.SerializeToString() for n in b.nodes]


def test_etplus_through_convert_auto_and_with_a_kineto_trace(samples_dir, tmp_path, run_cli):
    plus = samples_dir / "pytorch_etplus" / "ddp2mem_etplus.1.json.gz"
    r = run_cli("convert", "auto", str(plus), "-o", str(tmp_path / "auto"), "-q")
    assert r.exit_code == 0, r.stderr
    assert Path(f"{tmp_path}/auto.1.et").exists() or Path(f"{tmp_path}/auto.0.et").exists()
    kin = samples_dir / "pytorch" / "ddp2mem" / "kineto.1.json.gz"
    r = run_cli("convert", "pytorch", str(plus), "-k", str(kin), "-o", str(tmp_path / "both"))
    assert r.exit_code == 1
    assert "already holds its Kineto figures" in r.stderr and "Traceback" not in r.stderr
    assert not list(tmp_path.glob("both*"))


def test_gpu_etplus_gives_the_same_nodes_and_dependencies(samples_dir, tmp_path):
    """A GPU run (H200, torch 2.11, fused Adam; samples/pytorch_gpu/fused) linked by the official tool.

    The official linker keeps kernels and memcpys but not memsets (its GPU-op categories), and no
    CUDA runtime calls, so the host's synchronizations are not in it; our side links the same ET
    with the Kineto trace less its `gpu_memset` events and its synchronize calls; then every node
    (kernels with their streams, launch queues, host operators) and every dependency is the same."""
    run = samples_dir / "pytorch_gpu" / "fused"
    doc = orjson.loads(gzip.decompress((run / "kineto.json.gz").read_bytes()))
    memsets = [e for e in doc["traceEvents"] if e.get("cat") == "gpu_memset"]
    assert len(memsets) == 50
    syncs = ("cudaDeviceSynchronize", "cudaStreamSynchronize")
    doc["traceEvents"] = [e for e in doc["traceEvents"] if e.get("cat") != "gpu_memset" and e.get("name") not in syncs]
    kineto = tmp_path / "kineto.json"
    kineto.write_bytes(orjson.dumps(doc))
    keep = Options(overhead="keep")
    (own,) = convert_files([run / "et.json.gz"], [kineto], tmp_path / "own", keep)
    (plus,) = convert_files([samples_dir / "pytorch_etplus" / "gpu_fused_etplus.json.gz"], [], tmp_path / "plus", keep)
    assert plus["gpu_ops"] == own["gpu_ops"] == 376 and plus["gpu_ops_without_launcher"] == 0
    assert plus["linked"] == own["linked"] == 3006
    a, b = read_traces([tmp_path / "own"])[0], read_traces([tmp_path / "plus"])[0]
    ka, kb = _keyed(a), _keyed(b)
    assert len(ka) > 6000
    assert Counter(ka.values()) == Counter(kb.values())
    kernels = [
        get_attr(n, "stream")
        for n in b.nodes
        if get_attr(n, "is_cpu_op") is False and get_attr(n, "queue_of") is None  # not a launch queue
    ]
    assert len(kernels) == 376 and None not in kernels
    ea, eb = _edges(a, ka), _edges(b, kb)
    assert sum(ea.values()) > 6000
    assert sum(((ea - eb) + (eb - ea)).values()) == 0
    assert validate_traces([b]).ok


def test_bad_etplus_is_one_line(samples_dir, tmp_path, run_cli):
    doc = orjson.loads(gzip.decompress((samples_dir / "pytorch_etplus" / "ddp2mem_etplus.0.json.gz").read_bytes()))
    doc["nodes"][5]["ts"] = "soon"
    bad = tmp_path / "bad.0.json"
    bad.write_bytes(orjson.dumps(doc))
    r = run_cli("convert", "pytorch", str(bad), "-o", str(tmp_path / "out"))
    assert r.exit_code == 1 and "Traceback" not in r.stderr
    assert f"{bad}: node #5: 'ts' and the duration must be numbers" in r.stderr
    assert not list(tmp_path.glob("out*"))
