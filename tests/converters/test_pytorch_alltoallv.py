"""All-to-all with per-peer splits in the PyTorch converter: the recorded split lists become
`comm_send_bytes`/`comm_recv_bytes` (bytes per group rank) on the collective node.

The real run is `pytorch/moeskew4` (tools/pytorch_zoo.py `moeskew`: Zipf-routed tokens of 64
float32 each, `all_to_all_single` with the split table its manifest lists). The Kineto-args and
record_param_comms forms come from NCCL runs, which no tool here can record: those cases are built
to the documented field layouts (docs/pytorch.md, PyTorch's ParamCommsUtils) and say so.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from chakra.converters.pytorch import comms, convert
from chakra.converters.pytorch.ops import Op
from chakra.io import read_traces
from chakra.schema import CollectiveType, NodeType
from chakra.schema.attrs import RECV_BYTES, SEND_BYTES, get_attr

TOKEN_BYTES = 64 * 4  # WIDTH float32 values per token in tools/pytorch_zoo.py


@pytest.fixture(scope="module")
def moeskew(samples_dir: Path, tmp_path_factory) -> tuple[list, dict]:
    d = samples_dir / "pytorch" / "moeskew4"
    manifest = json.loads((d / "manifest.json").read_text())
    prefix = tmp_path_factory.mktemp("moeskew") / "raw"
    convert(
        [d / f"et.{r}.json.gz" for r in range(4)], prefix, kineto=[d / f"kineto.{r}.json.gz" for r in range(4)], jobs=1
    )
    return read_traces([prefix]), manifest


def test_recorded_splits_become_per_peer_bytes(moeskew):
    traces, manifest = moeskew
    splits = manifest["what"]["splits"]  # [i][j]: tokens rank i routes to expert rank j
    assert len({sum(col) for col in zip(*splits)}) > 1, "the recorded routing must be imbalanced"
    for t in traces:
        r = t.rank
        row = [v * TOKEN_BYTES for v in splits[r]]
        col = [splits[j][r] * TOKEN_BYTES for j in range(4)]
        a2a = [n for n in t.nodes if n.type == NodeType.COMM_COLL_NODE]
        assert [get_attr(n, "comm_type") for n in a2a] == [CollectiveType.ALL_TO_ALL] * 4
        got = [(list(get_attr(n, SEND_BYTES)), list(get_attr(n, RECV_BYTES))) for n in a2a]
        # forward dispatch, forward combine, then autograd's reverse of each (combine, dispatch)
        assert got == [(row, col), (col, row), (row, col), (col, row)], (r, got)
        assert [get_attr(n, "comm_size") for n in a2a] == [sum(s) for s, _ in got]


def test_even_all_to_all_keeps_no_splits(samples_dir: Path, tmp_path):
    """all_to_all_single without split lists (misc4) stays the even collective it was."""
    d = samples_dir / "pytorch" / "misc4"
    convert([d / f"et.{r}.json.gz" for r in range(4)], tmp_path / "m", jobs=1)
    a2a = [
        n
        for t in read_traces([tmp_path / "m"])
        for n in t.nodes
        if n.type == NodeType.COMM_COLL_NODE and get_attr(n, "comm_type") == CollectiveType.ALL_TO_ALL
    ]
    assert len(a2a) == 4
    assert all(get_attr(n, SEND_BYTES) is None for n in a2a)


def test_kineto_split_args():
    """Kineto's comm args (built to the documented layout: split lists as strings, element counts)."""
    args = {
        "Collective name": "all_to_allv",
        "In msg nelems": 80,
        "Out msg nelems": 48,
        "dtype": "Float",
        "In split size": "[1, 3, 0, 6]",
        "Out split size": "[2, 2, 1, 1]",
        "Process Group Name": "0",
    }
    info = comms.from_kineto_args(args)
    assert info.coll == CollectiveType.ALL_TO_ALL and info.size == 320
    assert info.send_splits == (32, 96, 0, 192)  # 80 elements over 10 rows: 8 floats = 32 B a row
    assert info.recv_splits == (64, 64, 32, 32)
    args["In split size"] = "[]"  # an even all_to_all: no lists
    assert comms.from_kineto_args(args).send_splits == ()


def test_record_param_comms_positional_splits():
    """record_param_comms of ET 1.0.3+ (built to the documented positional layout)."""
    tensor = [7, 8, 0, 12, 4, "cuda:0"]  # 12 float32 elements
    values = [tensor, 3, ["0", "default_pg"], 0, "all_to_allv", [1, 2, 3], [2, 2, 2], 0, 1, 3]
    types = ["Tensor(float)", "Int", "Tuple[String,String]", "Int", "String"] + ["GenericList[Int]"] * 2 + ["Int"] * 3
    op = Op(1, "record_param_comms")
    op.inputs = (values, [[12]] + [[]] * 9, types)
    info = comms.from_record_param_comms(op)
    assert info.size == 48
    assert info.send_splits == (8, 16, 24) and info.recv_splits == (16, 16, 16)


@pytest.mark.parametrize(
    "splits,total,want",
    [([1, 2, 3], 60, (10, 20, 30)), ([], 60, ()), ([1, 2], 7, ()), ("[4, 4]", 16, (8, 8)), ([1, -1], 4, ())],
)
def test_split_bytes(splits, total, want):
    assert comms.split_bytes(splits, total) == want
