"""A seeded, deterministic mutation fuzzer over the bundled real samples of every input format.

Each case takes a real sample (or a trace the toolchain produced from one), mutates it with a
`random.Random` seeded by (format, case number, base seed), runs the real `chakra` command on it
in-process (typer's runner, in a pool of forked workers) and classifies the outcome:

- ok: exit 0;  error: exit 1 with an `error:` line (a clean refusal);
- crash: any other exit code, an exception other than a ChakraError escaping, a traceback,
  a `MemoryError`, or exit 1 without an `error:` line (click's bare "Aborted.");
- hang: the call took longer than the time bound;
- leftover: a failed call left a file in its output folder or in the temp folder;
- memory: the worker's peak RSS went over the memory bound during the case.

The same case number always gives the same input, so a failure is reproduced by
`python tests/fuzz/fuzzlib.py --format FMT --case N`. `make fuzz N=...` runs many cases per
format, prints the counts and writes each crashing input with its command to a folder.
"""

from __future__ import annotations

import argparse
import gzip
import json
import math
import multiprocessing
import os
import random
import resource
import shutil
import signal
import sqlite3
import sys
import tarfile
import tempfile
import time
import traceback
from collections import Counter, defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

REPO = Path(__file__).resolve().parents[2]
SAMPLES = Path(os.environ.get("CHAKRA_SAMPLES") or REPO / "tests" / "data" / "samples")
TIME_BOUND_S = float(os.environ.get("CHAKRA_FUZZ_TIME_BOUND", "30"))
MEM_BOUND_MB = 1500  # peak RSS a worker may reach; the samples need well under 500 MB
MEM_LIMIT_BYTES = 6 << 30  # address-space cap of a worker: a runaway allocation fails fast
PROJECT_DIRS = ("chakra", "converters", "feeder", "visualizers")


# ---------------------------------------------------------------------------------------------
# Seeds: the real samples, plus traces the toolchain produces from them (built once per run)


def _cli(*args: str) -> None:
    """Run the chakra CLI in-process to build a seed; seeds must build cleanly."""
    from typer.testing import CliRunner

    from chakra.cli import app

    result = CliRunner().invoke(app, list(args), catch_exceptions=False)
    if result.exit_code != 0:
        raise RuntimeError(f"building a fuzz seed failed: chakra {' '.join(args)}: {result.output[-500:]}")


def build_seeds(work: Path) -> Path:
    """Seed inputs under work/seeds (idempotent: a finished build is reused)."""
    seeds = work / "seeds"
    if (seeds / ".done").exists():
        return seeds
    seeds.mkdir(parents=True, exist_ok=True)
    s = SAMPLES
    ddp2 = s / "pytorch" / "ddp2"
    _cli(
        "convert", "pytorch", str(ddp2 / "et.0.json"), str(ddp2 / "et.1.json"),
        "-k", str(ddp2 / "kineto.0.json"), "-k", str(ddp2 / "kineto.1.json"), "-o", str(seeds / "ddp2"),
    )  # fmt: skip
    for et in sorted((s / "astrasim" / "all_reduce_8npus_1MB").glob("*.et")):
        shutil.copy(et, seeds / et.name)
    # send/recv and collectives across ranks: the repository's example pipeline workload
    _cli("generate", "spec", str(REPO / "examples" / "two_stage_pipeline.yaml"), "-o", str(seeds / "pipe"))
    with open(seeds / "ddp2.0.et", "rb") as f, gzip.GzipFile(seeds / "ddp2gz.0.et.gz", "wb", mtime=0) as g:
        g.write(f.read())
    _cli("jsonize", str(seeds / "ddp2.0.et"), "-o", str(seeds / "ddp2.0.json"))
    _cli("simulate", str(s / "astrasim" / "all_reduce_8npus_1MB" / "all_reduce"), "--log", str(seeds / "ar.log.csv"))
    _cli("simulate", str(seeds / "pipe"), "--log", str(seeds / "pipe.log.csv"))
    from chakra.converters.cupti.records import export_cupti_records

    export_cupti_records(s / "nsys" / "testcuda_nsys2026.1_report2.sqlite", seeds / "records.json")
    with tarfile.open(s / "bigsim" / "text2log_v6_examples.tgz") as tar:
        tar.extractall(seeds / "bigsim", filter="data")
    (seeds / ".done").write_text("ok\n")
    return seeds


# ---------------------------------------------------------------------------------------------
# Mutations


INTERESTING_BYTES = [b"\x00", b"\xff", b"\x7f", b"\x80", b"\xff" * 10 + b"\x01", b"\x80" * 9 + b"\x01", b"\x1f\x8b"]


def mutate_bytes(rng: random.Random, data: bytes, rounds: Optional[int] = None) -> bytes:
    """Bit flips, truncation, insertions, deletions and duplicated chunks."""
    buf = bytearray(data)
    for _ in range(rounds or rng.randint(1, 4)):
        op = rng.choice(("flip", "flip", "truncate", "insert", "delete", "dup", "set"))
        n = len(buf)
        if n == 0:
            buf += rng.choice(INTERESTING_BYTES)
            continue
        p = rng.randrange(n)
        if op == "flip":
            for _ in range(rng.randint(1, 8)):
                q = rng.randrange(n)
                buf[q] ^= 1 << rng.randrange(8)
        elif op == "truncate":
            del buf[p:]
        elif op == "insert":
            ins = rng.choice(INTERESTING_BYTES) if rng.random() < 0.5 else rng.randbytes(rng.randint(1, 16))
            buf[p:p] = ins
        elif op == "delete":
            del buf[p : p + rng.randint(1, 64)]
        elif op == "dup":
            chunk = bytes(buf[p : p + rng.randint(1, 4096)])
            q = rng.randrange(n)
            buf[q:q] = chunk * rng.randint(1, 3)
        else:
            val = rng.choice(INTERESTING_BYTES)
            buf[p : p + len(val)] = val
    return bytes(buf)


_HUGE = [2**63, 2**64, 2**64 - 1, -(2**63) - 1, 10**30, -1, -(10**18), 2**31, 1e308, -1e308, 0.5]


def _containers(obj: Any, path: tuple = ()) -> list[tuple[tuple, Any]]:
    out = []
    stack = [(path, obj)]
    while stack and len(out) < 50000:
        p, o = stack.pop()
        if isinstance(o, (dict, list)):
            out.append((p, o))
            items = o.items() if isinstance(o, dict) else enumerate(o)
            for k, v in items:
                if isinstance(v, (dict, list)):
                    stack.append((p + (k,), v))
    return out


def mutate_json(rng: random.Random, doc: Any) -> Any:
    """Structural mutations: dropped and renamed keys, wrong types, huge/negative numbers, NaN, nesting."""
    for _ in range(rng.randint(1, 3)):
        conts = _containers(doc)
        if not conts:
            return rng.choice([[], {}, None, 1, "x"])
        _, c = rng.choice(conts)
        if isinstance(c, dict):
            if not c:
                c["x"] = 1
                continue
            key = rng.choice(list(c))
        else:
            if not c:
                c.append(rng.choice([1, "x", {}, []]))
                continue
            key = rng.randrange(len(c))
        op = rng.choice(("drop", "rename", "type", "huge", "nan", "nest", "string", "dup"))
        if op == "drop":
            del c[key]
        elif op == "rename" and isinstance(c, dict):
            c[key + rng.choice(("_", "X", "s"))] = c.pop(key)
        elif op == "type":
            c[key] = rng.choice([[1, 2], {"a": 1}, "abc", 3.5, None, True, -7, [], {}, [[[]]]])
        elif op == "huge":
            c[key] = rng.choice(_HUGE)
        elif op == "nan":
            c[key] = rng.choice([math.nan, math.inf, -math.inf])
        elif op == "nest":
            v: Any = c[key]
            for _ in range(rng.choice((50, 2000, 5000))):
                v = [v]
            c[key] = v
        elif op == "string":
            c[key] = "A" * rng.choice((0, 1, 5000, 100000))
        elif isinstance(c, list):
            c.extend(c[: rng.randint(1, 5)])
    return doc


def mutate_json_file(rng: random.Random, src: Path, dst: Path) -> None:
    raw = src.read_bytes()
    gz = raw[:2] == b"\x1f\x8b"
    text = gzip.decompress(raw) if gz else raw
    if rng.random() < 0.25:
        out = mutate_bytes(rng, text)
    else:
        try:
            docs, lines = [json.loads(text)], False
        except ValueError:  # JSON lines (CUPTI records)
            docs, lines = [json.loads(x) for x in text.splitlines() if x.strip()], True
        docs = mutate_json(rng, docs)
        try:  # NaN/Infinity are written as bare tokens on purpose
            if lines and isinstance(docs, list):
                out = b"\n".join(json.dumps(x).encode() for x in docs) + b"\n"
            else:
                out = json.dumps(docs[0] if isinstance(docs, list) and docs else docs).encode()
        except (RecursionError, ValueError):
            out = text
    if gz:
        out = gzip.compress(out, 1, mtime=0)
        if rng.random() < 0.2:
            out = mutate_bytes(rng, out, 1)
    dst.write_bytes(out)


def mutate_sqlite(rng: random.Random, src: Path, dst: Path) -> None:
    """Altered rows and column types (SQLite stores any type in any column), dropped tables."""
    shutil.copy(src, dst)
    if rng.random() < 0.1:
        dst.write_bytes(mutate_bytes(rng, dst.read_bytes(), 1))
        return
    con = sqlite3.connect(dst)
    try:
        tables = [r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table'")]
        for _ in range(rng.randint(1, 4)):
            table = rng.choice(tables)
            cols = [r[1] for r in con.execute(f'PRAGMA table_info("{table}")')]
            count = con.execute(f'SELECT count(*) FROM "{table}"').fetchone()[0]
            op = rng.choice(("update", "update", "update", "delete", "drop", "null"))
            if op == "drop" and rng.random() < 0.3:
                con.execute(f'ALTER TABLE "{table}" RENAME TO "{table}_gone"')
                tables.remove(table)
            elif op == "delete" and count:
                con.execute(f'DELETE FROM "{table}" WHERE rowid % ? = 0', (rng.randint(2, 5),))
            elif cols and count:
                col = rng.choice(cols)
                value = rng.choice(["abc", "", 1e308, -1, -4, 2**63 - 1, -(2**63), 3.5, b"\x00\x01", None, 0])
                where = (
                    ""
                    if op == "null"
                    else f' WHERE rowid IN (SELECT rowid FROM "{table}" ORDER BY random() LIMIT {rng.randint(1, 5)})'
                )
                con.execute(f'UPDATE "{table}" SET "{col}" = ?{where}', (value,))
        con.commit()
    except sqlite3.Error:
        pass
    finally:
        con.close()


# .et semantic mutations: valid protobufs with wrong meaning


def _load_ranks(prefix: Path) -> list:
    from chakra.io import read_traces

    return read_traces([str(prefix)])


def mutate_semantics(rng: random.Random, traces: list) -> str:
    from chakra.schema import NodeType, pb
    from chakra.schema.attrs import set_attr

    t = rng.choice(traces)
    nodes = t.nodes
    if not nodes:
        return "none"
    ids = [n.id for n in nodes]
    op = rng.choice(
        (
            "missing_dep", "self_dep", "cycle", "dup_id", "bad_type", "coll_type", "coll_size", "drop_coll",
            "send_dst", "send_tag", "drop_send", "huge_attr", "nan_attr", "huge_id", "deadlock", "huge_dur",
        )
    )  # fmt: skip
    n = rng.choice(nodes)
    comm = [x for x in nodes if x.type in (NodeType.COMM_SEND_NODE, NodeType.COMM_RECV_NODE, NodeType.COMM_COLL_NODE)]
    coll = [x for x in nodes if x.type == NodeType.COMM_COLL_NODE]
    sends = [x for x in nodes if x.type == NodeType.COMM_SEND_NODE]
    if op == "missing_dep":
        n.data_deps.append(max(ids) + 1000)
    elif op == "self_dep":
        n.ctrl_deps.append(n.id)
    elif op == "cycle" and n.data_deps:
        parent = next((x for x in nodes if x.id == n.data_deps[0]), None)
        if parent is not None:
            parent.data_deps.append(n.id)
    elif op == "dup_id" and len(nodes) > 1:
        n.id = rng.choice(ids)
    elif op == "bad_type":
        n.type = rng.choice((8, 99, 2**31 - 1))
    elif op == "coll_type" and coll:
        set_attr(rng.choice(coll), "comm_type", rng.choice((0, 5, 99, -1)))
    elif op == "coll_size" and coll:
        set_attr(rng.choice(coll), "comm_size", rng.choice((0, 1, 2**40, -5)))
    elif op == "drop_coll" and coll:
        nodes.remove(rng.choice(coll))
    elif op == "send_dst" and sends:
        set_attr(rng.choice(sends), "comm_dst", rng.choice((0, 1, 5, 1000, -1)))
    elif op == "send_tag" and sends:
        set_attr(rng.choice(sends), "comm_tag", rng.randint(1, 9))
    elif op == "drop_send" and sends:
        nodes.remove(rng.choice(sends))
    elif op == "huge_attr":
        target = rng.choice(comm or nodes)
        attr = target.attr.add(name=rng.choice(("comm_size", "tensor_size", "num_ops", "comm_type")))
        attr.uint64_val = 2**64 - 1
    elif op == "nan_attr":
        target = rng.choice(comm or nodes)
        name = rng.choice(("comm_size", "num_ops", "comm_src", "comm_dst", "comm_tag", "comm_type", "is_cpu_op"))
        for a in list(target.attr):
            if a.name == name:
                target.attr.remove(a)
        target.attr.add(name=name, double_val=rng.choice((math.nan, math.inf, -math.inf)))
    elif op == "huge_id":
        n.id = rng.choice((2**63, 2**64 - 1))
    elif op == "huge_dur":
        n.duration_micros = rng.choice((2**63, 2**64 - 1))
    elif op == "deadlock" and sends:
        # a send made to wait for the last receive of its rank: a cross-rank wait-for cycle when
        # that receive's send is downstream of this one
        recvs = [x for x in nodes if x.type == NodeType.COMM_RECV_NODE]
        if recvs:
            s = rng.choice(sends)
            s.data_deps.append(recvs[-1].id)
    if rng.random() < 0.1:
        nodes.append(pb.Node(id=max(ids) + 1, name="extra", type=NodeType.COMP_NODE, data_deps=[max(ids) + 7]))
    return op


# ---------------------------------------------------------------------------------------------
# Targets: how one case of a format is built and which command runs it


@dataclass
class Case:
    args: list[str]  # CLI arguments; "__feeder__ PATH" iterates the library ETFeeder instead
    inputs: list[Path]  # the mutated inputs (kept when the case fails)
    note: str = ""


def _pick(rng: random.Random, paths: list[Path]) -> Path:
    return rng.choice(sorted(paths))


def case_et(rng: random.Random, seeds: Path, d: Path, out: Path) -> Case:
    src = _pick(rng, [*seeds.glob("ddp2.*.et"), *seeds.glob("all_reduce.*.et"), *seeds.glob("pipe.*.et")])
    if rng.random() < 0.2:
        src = seeds / "ddp2gz.0.et.gz"
    dst = d / ("in.0.et.gz" if src.name.endswith(".gz") else "in.0.et")
    data = src.read_bytes()
    if src.name.endswith(".gz") and rng.random() < 0.5:
        data = gzip.compress(mutate_bytes(rng, gzip.decompress(data)), 1, mtime=0)
    else:
        data = mutate_bytes(rng, data)
    dst.write_bytes(data)
    cmd = rng.choice(("validate", "stats", "jsonize", "simulate", "feeder"))
    args = {
        "validate": ["validate", str(dst)],
        "stats": ["stats", str(dst), "--json"],
        "jsonize": ["jsonize", str(dst), "-o", str(out / "x.0.json")],
        "simulate": ["simulate", str(dst), "--log", str(out / "sim.csv")],
        "feeder": ["__feeder__", str(dst)],
    }[cmd]
    return Case(args, [dst], cmd)


def case_et_semantic(rng: random.Random, seeds: Path, d: Path, out: Path) -> Case:
    from chakra.io import rank_path, write_trace

    prefix = rng.choice(("ddp2", "pipe", "all_reduce"))
    traces = _load_ranks(seeds / prefix)
    ops = [mutate_semantics(rng, traces) for _ in range(rng.randint(1, 2))]
    written = [write_trace(rank_path(d / "t", t.rank), t) for t in traces]
    cmd = rng.choice(("validate", "simulate", "simulate", "feeder"))
    if cmd == "feeder":
        args = ["__feeder__", str(rng.choice(written))]
    elif cmd == "validate":
        args = ["validate", str(d / "t")]
    else:
        args = ["simulate", str(d / "t"), "--log", str(out / "sim.csv")]
        if prefix == "pipe":
            args += ["--comm-group", str(seeds / "pipe.comm_groups.json")]
    return Case(args, written, f"{prefix} {'+'.join(ops)} {cmd}")


def case_json(rng: random.Random, seeds: Path, d: Path, out: Path) -> Case:
    src = _pick(rng, [seeds / "ddp2.0.json", SAMPLES / "et" / "official_small_chakra.0.json"])
    gz = rng.random() < 0.2
    dst = d / ("in.0.json.gz" if gz else "in.0.json")
    if gz:
        tmp = d / "plain.json"
        tmp.write_bytes(gzip.compress(src.read_bytes(), 1, mtime=0))
        mutate_json_file(rng, tmp, dst)
        tmp.unlink()
    else:
        mutate_json_file(rng, src, dst)
    cmd = rng.choice(("dejsonize", "convert", "validate", "simulate"))
    args = {
        "dejsonize": ["dejsonize", str(dst), "-o", str(out / "x.0.et")],
        "convert": ["convert", "json", str(dst), "-o", str(out / "o")],
        "validate": ["validate", str(dst)],
        "simulate": ["simulate", str(dst), "--log", str(out / "sim.csv")],
    }[cmd]
    return Case(args, [dst], cmd)


def case_config(rng: random.Random, seeds: Path, d: Path, out: Path) -> Case:
    tmpl = SAMPLES / "astrasim" / "configs_rt_template"
    cfgs = {
        "network": tmpl / "network_cfg.yml",
        "system": tmpl / "system_cfg.json",
        "memory": REPO / "chakra" / "data" / "configs" / "remote_memory.json",
    }
    which = rng.choice(list(cfgs))
    src = cfgs[which]
    dst = d / src.name
    if src.suffix == ".json" or rng.random() < 0.5:
        if src.suffix == ".yml":
            import yaml

            text = json.dumps(yaml.safe_load(src.read_text())).encode()
            (d / "net.json").write_bytes(text)
            mutate_json_file(rng, d / "net.json", dst)
            (d / "net.json").unlink()
        else:
            mutate_json_file(rng, src, dst)
    else:
        dst.write_bytes(mutate_bytes(rng, src.read_bytes()))
    paths = {k: (dst if k == which else v) for k, v in cfgs.items()}
    trace = rng.choice((str(SAMPLES / "astrasim" / "all_reduce_8npus_1MB" / "all_reduce"), str(seeds / "pipe")))
    args = ["simulate", trace, "--network", str(paths["network"]), "--system", str(paths["system"])]
    args += ["--memory", str(paths["memory"]), "--log", str(out / "sim.csv")]
    if trace.endswith("pipe"):
        args += ["--comm-group", str(seeds / "pipe.comm_groups.json")]
    return Case(args, [dst], which)


def case_comm_group(rng: random.Random, seeds: Path, d: Path, out: Path) -> Case:
    dst = d / "groups.json"
    mutate_json_file(rng, seeds / "pipe.comm_groups.json", dst)
    return Case(["simulate", str(seeds / "pipe"), "--comm-group", str(dst), "--log", str(out / "sim.csv")], [dst])


def case_simlog(rng: random.Random, seeds: Path, d: Path, out: Path) -> Case:
    which = rng.choice(("ar", "pipe"))
    src = seeds / f"{which}.log.csv"
    dst = d / "log.csv"
    text = src.read_bytes()
    if rng.random() < 0.5:
        lines = text.split(b"\n")
        for _ in range(rng.randint(1, 3)):
            i = rng.randrange(len(lines))
            fields = lines[i].split(b",")
            j = rng.randrange(len(fields))
            fields[j] = rng.choice([b"", b"abc", b"9" * 5000, b"-1", b"1e308", b"nan", str(2**64).encode()])
            lines[i] = b",".join(fields)
        text = b"\n".join(lines)
    else:
        text = mutate_bytes(rng, text)
    dst.write_bytes(text)
    trace = str(SAMPLES / "astrasim" / "all_reduce_8npus_1MB" / "all_reduce") if which == "ar" else str(seeds / "pipe")
    args = ["timeline", str(dst), "-o", str(out / "tl.json")]
    if rng.random() < 0.5:
        args += ["--trace", trace, "--flows"]
    return Case(args, [dst])


def case_pytorch(rng: random.Random, seeds: Path, d: Path, out: Path) -> Case:
    src = _pick(
        rng,
        [
            SAMPLES / "pytorch_et" / "hta_1.0.1_benchmark_simple_add_et.json.gz",
            SAMPLES / "pytorch_et" / "param_1.0.1_linear_et.json.gz",
        ],
    )
    dst = d / src.name
    mutate_json_file(rng, src, dst)
    return Case(["convert", "pytorch", str(dst), "-o", str(out / "o")], [dst])


def case_kineto(rng: random.Random, seeds: Path, d: Path, out: Path) -> Case:
    src = _pick(
        rng,
        [
            SAMPLES / "kineto" / "hta_benchmark_simple_add_trace.json.gz",
            SAMPLES / "kineto" / "hta_event_sync_trace.json.gz",
            SAMPLES / "kineto" / "hta_triton_example.json.gz",
        ],
    )
    dst = d / src.name
    mutate_json_file(rng, src, dst)
    return Case(["convert", "kineto", str(dst), "-o", str(out / "o")], [dst])


def case_nsys(rng: random.Random, seeds: Path, d: Path, out: Path) -> Case:
    src = _pick(rng, list((SAMPLES / "nsys").glob("*.sqlite")))
    dst = d / "report.sqlite"
    mutate_sqlite(rng, src, dst)
    per = rng.choice(("device", "process"))
    return Case(["convert", "nsys", str(dst), "--per", per, "-o", str(out / "o")], [dst])


def case_cupti(rng: random.Random, seeds: Path, d: Path, out: Path) -> Case:
    dst = d / "records.json"
    mutate_json_file(rng, seeds / "records.json", dst)
    return Case(["convert", "cupti", str(dst), "-o", str(out / "o")], [dst])


def case_bigsim(rng: random.Random, seeds: Path, d: Path, out: Path) -> Case:
    cases = sorted(p for p in (seeds / "bigsim" / "examples").iterdir() if p.is_dir())
    src = rng.choice(cases)
    dst = d / "log"
    shutil.copytree(src, dst)
    victim = rng.choice(sorted(p for p in dst.rglob("*") if p.is_file()))
    victim.write_bytes(mutate_bytes(rng, victim.read_bytes()))
    return Case(["convert", "bigsim", str(dst), "-o", str(out / "o")], [victim])


def case_flexflow(rng: random.Random, seeds: Path, d: Path, out: Path) -> Case:
    src = _pick(rng, [REPO / "tests" / "data" / "flexflow" / n for n in ("dp2_taskgraph.dot", "mp2_taskgraph.dot")])
    dst = d / "taskgraph.dot"
    dst.write_bytes(mutate_bytes(rng, src.read_bytes()))
    return Case(
        ["convert", "flexflow", str(dst), "--placement", "*=0-1", "--bandwidth", "16", "-o", str(out / "o")], [dst]
    )


def case_text(rng: random.Random, seeds: Path, d: Path, out: Path) -> Case:
    src = _pick(rng, list((SAMPLES / "astrasim" / "text_workloads").glob("*.txt")))
    dst = d / "workload.txt"
    text = src.read_bytes()
    if rng.random() < 0.5:
        words = text.split(b" ")
        for _ in range(rng.randint(1, 3)):
            i = rng.randrange(len(words))
            words[i] = rng.choice([b"-1", b"99999999999999999999", b"NaN", b"abc", b"", b"1e308", b"0"])
        text = b" ".join(words)
    else:
        text = mutate_bytes(rng, text)
    dst.write_bytes(text)
    return Case(["convert", "text", str(dst), "--npus", "8", "-o", str(out / "o")], [dst])


#: format -> (case builder, cases in the default test run). The default counts keep the whole
#: fuzz test within a few minutes on two cores; `make fuzz N=...` runs N per format.
TARGETS: dict[str, tuple[Callable[..., Case], int]] = {
    "et": (case_et, 200),
    "et-semantic": (case_et_semantic, 200),
    "json": (case_json, 200),
    "config": (case_config, 200),
    "comm-group": (case_comm_group, 100),
    "simlog": (case_simlog, 200),
    "pytorch": (case_pytorch, 150),
    "kineto": (case_kineto, 150),
    "nsys": (case_nsys, 100),
    "cupti": (case_cupti, 150),
    "bigsim": (case_bigsim, 150),
    "flexflow": (case_flexflow, 100),
    "text": (case_text, 150),
}


# ---------------------------------------------------------------------------------------------
# Running one case


class _Timeout(BaseException):
    """Raised by the alarm; a BaseException so no `except Exception` in the code under test eats it."""


@dataclass
class Outcome:
    fmt: str
    case: int
    kind: str  # ok | error | crash | hang | leftover | memory
    signature: str = ""
    detail: str = ""
    seconds: float = 0.0
    args: list[str] = field(default_factory=list)
    inputs: dict[str, bytes] = field(default_factory=dict)
    note: str = ""


def _signature(exc: BaseException) -> str:
    frames = traceback.extract_tb(exc.__traceback__)
    where = "?"
    for fr in frames:
        rel = os.path.relpath(fr.filename, REPO)
        if rel.split(os.sep)[0] in PROJECT_DIRS:
            where = f"{rel}:{fr.lineno}"
    return f"{type(exc).__name__}@{where}"


def _run_feeder(path: str) -> int:
    from chakra.errors import ChakraError
    from chakra.feeder import ETFeeder

    try:
        feeder = ETFeeder(path)
        try:
            while True:
                node = feeder.get_next_issuable_node()
                if node is None:
                    break
                feeder.free_children_nodes(node.id)
        finally:
            feeder.close()
    except ChakraError as exc:
        sys.stderr.write(f"error: {exc}\n")
        return 1
    return 0


def _files_under(p: Path) -> list[str]:
    return sorted(str(x.relative_to(p)) for x in p.rglob("*") if x.is_file()) if p.exists() else []


def run_case(fmt: str, case: int, seeds: Path, base_seed: int = 0, keep_inputs: bool = False) -> Outcome:
    from typer.testing import CliRunner

    from chakra.cli import app
    from chakra.cli_common import state

    builder = TARGETS[fmt][0]
    rng = random.Random(f"{fmt}:{case}:{base_seed}")
    root = Path(tempfile.mkdtemp(prefix=f"fuzz-{fmt}-{case}-"))
    d, out, tmp = root / "in", root / "out", root / "tmp"
    for p in (d, out, tmp):
        p.mkdir()
    old_tmp = tempfile.tempdir
    outcome = Outcome(fmt, case, "ok")
    try:
        try:
            c = builder(rng, seeds, d, out)
        except Exception as exc:  # noqa: BLE001 - a bug of the harness, reported as such
            outcome.kind, outcome.signature = "crash", f"harness:{_signature(exc)}"
            outcome.detail = traceback.format_exc()[-300:]
            return outcome
        outcome.args, outcome.note = c.args, c.note
        if keep_inputs:
            outcome.inputs = {p.name: p.read_bytes() for p in c.inputs if p.is_file() and p.stat().st_size < 50 << 20}
        tempfile.tempdir = str(tmp)
        os.environ["TMPDIR"] = str(tmp)
        state.debug = False
        before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        signal.signal(signal.SIGALRM, _on_alarm)
        signal.setitimer(signal.ITIMER_REAL, TIME_BOUND_S)
        t0 = time.perf_counter()
        try:
            if c.args[0] == "__feeder__":
                err = _Capture()
                real = sys.stderr
                sys.stderr = err
                try:
                    code, exc, stdout = _run_feeder(c.args[1]), None, ""
                except Exception as e:  # noqa: BLE001 - classified below
                    code, exc = 1, e
                finally:
                    sys.stderr = real
                stderr = err.text()
            else:
                result = CliRunner().invoke(app, c.args, catch_exceptions=True)
                code, exc = result.exit_code, result.exception
                stderr = _stderr_of(result)
                stdout = result.stdout
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
        outcome.seconds = time.perf_counter() - t0
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        if isinstance(exc, SystemExit):
            exc = None
        if exc is not None:
            outcome.kind, outcome.signature = "crash", _signature(exc)
            outcome.detail = f"{type(exc).__name__}: {str(exc)[:200]}"
        elif code not in (0, 1):
            outcome.kind, outcome.signature, outcome.detail = "crash", f"exit{code}", stderr[-300:]
        elif "Traceback" in stderr or "MemoryError" in stderr:
            outcome.kind, outcome.signature, outcome.detail = "crash", "traceback-or-MemoryError", stderr[-300:]
        elif code == 1 and "error:" not in stderr.lower() and "FAILED" not in stdout + stderr:
            # a clean failure is an `error:` line, or a check command's FAILED verdict
            outcome.kind, outcome.signature, outcome.detail = "crash", "exit1-without-error-line", stderr[-300:]
        elif code == 1:
            outcome.kind = "error"
            left = _files_under(out) + [f"$TMPDIR/{x}" for x in _files_under(tmp)]
            if left:
                outcome.kind, outcome.signature, outcome.detail = "leftover", "leftover", ", ".join(left[:5])
        if outcome.kind == "error" and fmt == "et-semantic" and c.args[0] == "simulate" and "deadlock" in stderr:
            # oracle: validate must fail a trace the simulator deadlocks on (traces mutated here;
            # a mutated --comm-group file is input validate never sees)
            check = CliRunner().invoke(app, ["validate", c.args[1]], catch_exceptions=True)
            if check.exit_code == 0:
                outcome.kind, outcome.signature = "crash", "validate-passes-what-simulate-deadlocks-on"
                outcome.detail = stderr[-300:]
        if peak > MEM_BOUND_MB * 1024 and peak > before:
            outcome.kind, outcome.signature = "memory", f"peak RSS {peak // 1024} MB"
    except _Timeout:
        outcome.kind, outcome.signature = "hang", f"over {TIME_BOUND_S:g} s"
    except MemoryError:
        outcome.kind, outcome.signature = "crash", "MemoryError@harness"
    finally:
        tempfile.tempdir = old_tmp
        shutil.rmtree(root, ignore_errors=True)
    if outcome.kind not in BAD:
        # only failing inputs are saved; holding every input would grow the parent, whose pages
        # (and peak RSS) the next forked workers inherit, until the memory check fires on them
        outcome.inputs = {}
    return outcome


def _on_alarm(signum: int, frame: Any) -> None:
    raise _Timeout()


class _Capture:
    def __init__(self) -> None:
        self.parts: list[str] = []

    def write(self, s: str) -> int:
        self.parts.append(s)
        return len(s)

    def flush(self) -> None:
        pass

    def text(self) -> str:
        return "".join(self.parts)


def _stderr_of(result: Any) -> str:
    try:
        return result.stderr
    except ValueError:  # older click: stderr not captured separately
        return result.output


# ---------------------------------------------------------------------------------------------
# Running many cases in a pool of forked workers

_SEEDS: Optional[Path] = None


def _init_worker(seeds: Path) -> None:
    global _SEEDS
    _SEEDS = seeds
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    if hard == resource.RLIM_INFINITY or hard > MEM_LIMIT_BYTES:
        resource.setrlimit(resource.RLIMIT_AS, (MEM_LIMIT_BYTES, hard))
    sys.setrecursionlimit(max(sys.getrecursionlimit(), 1000))


def _worker(task: tuple[str, int, int, bool]) -> Outcome:
    fmt, case, base_seed, keep = task
    assert _SEEDS is not None
    return run_case(fmt, case, _SEEDS, base_seed, keep)


def run_cases(
    formats: list[str],
    count: Optional[int],
    seeds: Path,
    *,
    jobs: int = 2,
    base_seed: int = 0,
    keep: bool = False,
    first: int = 0,
) -> list[Outcome]:
    tasks = [
        (fmt, i, base_seed, keep)
        for fmt in formats
        for i in range(first, first + (count if count is not None else TARGETS[fmt][1]))
    ]
    # Warm the imports once in the parent: forked workers share them.
    import chakra.cli  # noqa: F401
    import chakra.feeder  # noqa: F401

    ctx = multiprocessing.get_context("fork")
    with ctx.Pool(jobs, initializer=_init_worker, initargs=(seeds,), maxtasksperchild=100) as pool:
        return list(pool.imap_unordered(_worker, tasks, chunksize=2))


BAD = ("crash", "hang", "leftover", "memory")


def summarize(outcomes: list[Outcome]) -> str:
    by: dict[str, Counter] = defaultdict(Counter)
    for o in outcomes:
        by[o.fmt][o.kind] += 1
    cols = ("error", "ok", "crash", "hang", "leftover", "memory")
    lines = [f"{'format':<12} {'inputs':>7} " + " ".join(f"{c:>9}" for c in ("clean-err", *cols[1:]))]
    for fmt in TARGETS:
        if fmt in by:
            cnt = by[fmt]
            lines.append(f"{fmt:<12} {sum(cnt.values()):>7} " + " ".join(f"{cnt[c]:>9}" for c in cols))
    return "\n".join(lines)


def failure_report(outcomes: list[Outcome], limit: int = 20) -> str:
    bad = [o for o in outcomes if o.kind in BAD]
    sigs: dict[tuple[str, str], list[Outcome]] = defaultdict(list)
    for o in bad:
        sigs[(o.kind, o.signature)].append(o)
    lines = []
    for (kind, sig), os_ in sorted(sigs.items(), key=lambda kv: -len(kv[1]))[:limit]:
        o = os_[0]
        lines.append(
            f"{kind} {sig} x{len(os_)}: python tests/fuzz/fuzzlib.py --format {o.fmt} --case {o.case}"
            f"  [{o.note}] {o.detail[:160]}"
        )
    return "\n".join(lines)


def save_crashes(outcomes: list[Outcome], folder: Path) -> int:
    n = 0
    seen: set[tuple[str, str]] = set()
    for o in outcomes:
        if o.kind not in BAD:
            continue
        key = (o.fmt, o.signature)
        if key in seen:
            continue
        seen.add(key)
        safe = "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in f"{o.kind}_{o.signature}")[:100]
        dst = folder / o.fmt / safe
        dst.mkdir(parents=True, exist_ok=True)
        for name, data in o.inputs.items():
            (dst / name).write_bytes(data)
        (dst / "REPRO.txt").write_text(
            f"python tests/fuzz/fuzzlib.py --format {o.fmt} --case {o.case}\n"
            f"# chakra {' '.join(o.args)}\n# {o.note}\n# {o.detail}\n"
        )
        n += 1
    return n


def main(argv: Optional[list[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--count", type=int, default=None, help="cases per format (default: the test run's counts)")
    ap.add_argument("--format", action="append", choices=sorted(TARGETS), help="only these formats (repeatable)")
    ap.add_argument("--case", type=int, default=None, help="run this one case and show its outcome")
    ap.add_argument("--seed", type=int, default=0, help="base seed (a different seed, different inputs)")
    ap.add_argument("--jobs", type=int, default=max(1, min(os.cpu_count() or 1, 4)))
    ap.add_argument("--out", type=Path, default=Path("out/fuzz-crashes"), help="folder for crashing inputs")
    ap.add_argument("--work", type=Path, default=Path("out/fuzz-work"), help="folder for the seeds")
    a = ap.parse_args(argv)
    seeds = build_seeds(a.work.resolve())
    formats = a.format or list(TARGETS)
    if a.case is not None:
        for fmt in formats:
            o = run_case(fmt, a.case, seeds, a.seed, keep_inputs=True)
            print(f"{fmt} case {a.case}: {o.kind} {o.signature} ({o.seconds:.2f} s)\n  chakra {' '.join(o.args)}")
            print(f"  {o.note} {o.detail}")
        return 0
    t0 = time.time()
    outcomes = run_cases(formats, a.count, seeds, jobs=a.jobs, base_seed=a.seed, keep=True)
    print(summarize(outcomes))
    print(f"({len(outcomes)} cases in {time.time() - t0:.0f} s, {a.jobs} workers)")
    report = failure_report(outcomes, limit=100)
    if report:
        print("\nfailures by signature:\n" + report)
        n = save_crashes(outcomes, a.out)
        print(f"\n{n} crashing input(s) written under {a.out}/")
    return 1 if report else 0


if __name__ == "__main__":
    sys.path.insert(0, str(REPO))
    sys.exit(main())
