"""Process groups: the comm-group file beside the traces, METADATA nodes, and stripping them."""

from __future__ import annotations

import json

from chakra.commgroups import find_beside, groups_beside, metadata_groups, strip_metadata, write_comm_groups
from chakra.converters.pytorch import Options, convert_files
from chakra.dsl import Workload
from chakra.io import read_trace, read_traces
from chakra.schema import NodeType


def test_pytorch_metadata_groups_and_strip(samples_dir, tmp_path):
    d = samples_dir / "pytorch" / "ddp2"
    convert_files([d / "et.0.json"], [d / "kineto.0.json"], tmp_path / "m", Options(metadata_node=True))
    trace = read_trace(tmp_path / "m.0.et")
    assert metadata_groups(trace.nodes) == {"0": []}  # PyTorch's default group: [] means every rank
    kept, groups, dropped = strip_metadata(trace.nodes)
    assert dropped == 1 and groups == {"0": []} and len(kept) == len(trace.nodes) - 1
    ids = {n.id for n in kept}
    assert all(d in ids for n in kept for d in (*n.data_deps, *n.ctrl_deps))
    assert not (tmp_path / "m.comm_groups.json").exists()  # only the world group: nothing to write


def test_dsl_metadata_dependencies_are_rerouted(tmp_path):
    w = Workload(4)
    pair = w.group([0, 1], "pair")
    fwd = w.compute(w.all_ranks, "fwd", duration_us=3)
    w.all_reduce(1 << 20, group=pair, after=fwd)
    traces = w.traces(metadata_node=True)
    roots = [n for n in traces[0].nodes if list(n.data_deps) == [0]]
    assert roots  # the roots wait for the METADATA node 0
    kept, groups, dropped = strip_metadata(traces[0].nodes)
    assert dropped == 1 and groups[pair.pg_name] == [0, 1]
    assert all(0 not in n.data_deps for n in kept)
    assert list(traces[0].nodes[1].data_deps) == [0]  # the input is not modified

    w.save(tmp_path / "job")
    assert find_beside([tmp_path / "job"]) == tmp_path / "job.comm_groups.json"
    assert find_beside([tmp_path / "job.2.et"]) == tmp_path / "job.comm_groups.json"
    assert groups_beside([tmp_path / "job"]) == {pair.pg_name: [0, 1]}
    assert not [n for t in read_traces([tmp_path / "job"]) for n in t.nodes if n.type == NodeType.METADATA_NODE]


def test_write_keeps_only_what_astrasim_accepts(tmp_path):
    path = write_comm_groups(tmp_path / "p", {"0": [0, 1, 2, 3], "": [0, 1], "2": [2, 3], "10": [0, 2], "x": [1]})
    assert json.loads(path.read_text()) == {"2": [2, 3], "10": [0, 2]}  # ids > 0, numeric, sorted by id
    assert write_comm_groups(tmp_path / "p", {"0": [0, 1]}) is None
    assert not path.exists()  # a stale file would be picked up by the next reader


def test_rank_file_prefixes_matched_as_strings_are_prefix_of():
    """`find_beside` takes a thousand rank files' PREFIXes by matching their names as strings
    (`_prefixes`): the set must be `prefix_of`'s, relative and absolute, at the root, compressed
    and JSON-form, and None for a name that is no rank file."""
    from pathlib import Path

    from chakra.commgroups import _prefixes, prefix_of

    names = ("t.0.et", "t.1.et", "/tmp/d/t.0.et", "/t.3.et", "x/y/a.b.12.et.gz", "x/n.et", "j.2.json")
    files = [Path(p) for p in names]
    assert _prefixes(files) == {prefix_of(p) for p in files}
    assert _prefixes(files) == {Path("t"), Path("/tmp/d/t"), Path("/t"), Path("x/y/a.b"), None, Path("j")}
