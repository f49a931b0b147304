"""Matching NCCL kernels to calls by order is only for traces where linking found nothing.

HTA's real 2-rank DDP NCCL trace (rank 0, tests/data/samples/kineto/hta_nccl_data.json.gz), cut
as a profiling window cuts a trace: the first all-reduce's host calls removed (its kernel's call
lies before the window) and the last all-reduce kernel removed (it ran after the window). The
leftover kernel and call are both one all-reduce on the same group, yet they are different
collectives: since every other call of the group reached its kernel through the launch, they are
not paired, and both stay (15 all-reduces, as in the whole trace)."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

from chakra.converters.pytorch.driver import convert_files


def test_a_window_cut_trace_is_not_matched_by_order(samples_dir: Path, tmp_path):
    doc = json.loads(gzip.decompress((samples_dir / "kineto" / "hta_nccl_data.json.gz").read_bytes()))
    events = [e for e in doc["traceEvents"] if e.get("ph") == "X"]
    all_reduce_calls = sorted((e for e in events if e.get("name") == "c10d::allreduce_"), key=lambda e: e["ts"])
    first_ext = all_reduce_calls[0]["args"]["External id"]
    cut_calls = {first_ext, first_ext + 1, first_ext + 2}  # c10d::allreduce_, record_param_comms, nccl:all_reduce
    kernels = [e for e in events if e.get("cat") == "kernel" and e["name"].startswith("ncclKernel_AllReduce")]
    last_kernel = max(kernels, key=lambda e: e["ts"])
    doc["traceEvents"] = [
        e
        for e in doc["traceEvents"]
        if e is not last_kernel
        and not (e.get("cat") in ("cpu_op", "user_annotation") and e.get("args", {}).get("External id") in cut_calls)
    ]
    path = tmp_path / "kineto.0.json"
    path.write_text(json.dumps(doc))
    (tmp_path / "out").mkdir()
    [whole] = convert_files([], [samples_dir / "kineto" / "hta_nccl_data.json.gz"], tmp_path / "out" / "whole")
    [cut] = convert_files([], [path], tmp_path / "out" / "cut")
    assert whole["collectives"]["ALL_REDUCE"]["count"] == 15
    assert cut["comm_calls"] == whole["comm_calls"] - 1
    assert cut["comm_kernels_matched_by_order"] == 0
    assert cut["collectives"]["ALL_REDUCE"]["count"] == 15
