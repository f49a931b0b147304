"""Per-rank conversion and the multi-rank driver (pairing by rank, parallel processes, atomic output).

`convert_rank` does one rank in memory (library call); `convert_files` pairs ET and Kineto files
by rank, converts each rank in its own process when there are several, writes every rank to a
temporary file, and renames them all into `PREFIX.<rank>.et` only when every rank succeeded, so a
failure never leaves a half-written set.
"""

from __future__ import annotations

import contextlib
import gc
import os
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from operator import attrgetter
from pathlib import Path
from typing import Annotated, Any, Optional, Union

import msgspec

from chakra.commgroups import write_comm_groups
from chakra.converters.kineto.trace import KEvent, KinetoFile, load_kineto, sniff_kineto_head
from chakra.converters.pytorch import comms
from chakra.converters.pytorch.columns import RankColumns
from chakra.converters.pytorch.commmap import map_comms
from chakra.converters.pytorch.dag import SYNC_RUNTIME, Builder
from chakra.converters.pytorch.emit import CycleError, NodeEncoder, ordered
from chakra.converters.pytorch.et import ETFile, load_et, read_input_bytes, sniff_et_head
from chakra.converters.pytorch.etplus import is_etplus, load_etplus
from chakra.converters.pytorch.gloogroups import Survey, needs_solving, solve, solve_p2p
from chakra.converters.pytorch.link import add_gpu_ops, link_et, ops_from_kineto
from chakra.converters.pytorch.ops import COMM, CPU, GPU
from chakra.errors import ChakraError, InputError, TraceFormatError
from chakra.files import pool_worker_init, remove_stale_temps, temp_path, write_error
from chakra.io import TraceWriter, adopt_output, check_output_path, output_set, rank_path
from chakra.ranks import kineto_rank, rank_of_name, stated_rank
from chakra.schema import NodeType, node_type_name, pb
from chakra.sim.nogc import without_gc
from chakra.trace import Trace, make_metadata


@dataclass
class Options:
    gap_min_us: float = 1.0  # shorter CPU gaps are folded into the segment before them
    io: bool = True  # copy inputs/outputs (values, shapes, types) into IOInfo
    jobs: int = 0  # parallel processes for several ranks (0 = one per rank, up to the CPU count)
    # Keep the `process_group:init` METADATA node: ASTRA-sim aborts on it, so by default the groups
    # go to PREFIX.comm_groups.json only.
    metadata_node: bool = False
    # The profiler's cost (overhead.py): "remove" it (fitted to the untraced step time when one is
    # known: `step_time_ns`, else a manifest beside the inputs; estimated otherwise), "estimate"
    # it from the trace alone even where a manifest is (validation), or "keep" the profiled durations.
    overhead: str = "remove"
    step_time_ns: Optional[float] = None
    overhead_replay: bool = False  # also replay the profiled and the corrected trace for the report


@dataclass
class GlooJob:
    """The job-wide side of placing gloo collectives on process groups (gloogroups).

    A first pass converts each rank with `defer`: a rank whose gloo threads its own trace cannot
    place stops after mapping its collectives and leaves its `Survey` in `surveys`; the others are
    converted as usual (their surveys too). `gloogroups.solve` over every survey gives `placed`
    (rank -> gloo thread -> pg_name), and the deferred ranks are converted again with it."""

    defer: bool = False
    #: stop every rank after mapping its collectives (a survey pass: `survey_rank_files`)
    survey_only: bool = False
    placed: dict[int, dict[int, str]] = field(default_factory=dict)
    #: rank -> point-to-point op id -> pg_name (`gloogroups.solve_p2p`)
    p2p: dict[int, dict[int, str]] = field(default_factory=dict)
    surveys: dict[int, Survey] = field(default_factory=dict)


@dataclass
class RankInput:
    rank: int
    et: Optional[str] = None  # path (or "archive:member") of the ET document
    et_raw: Any = None  # bytes, or an mmap of a big plain file
    kineto: Optional[str] = None
    kineto_raw: Any = None


@without_gc
def convert_rank(
    et: Optional[ETFile],
    kf: Optional[KinetoFile],
    rank: int,
    options: Optional[Options] = None,
    writer: Optional[TraceWriter] = None,
    release: bool = False,
    job: Optional[GlooJob] = None,
    columns: Optional[RankColumns] = None,
) -> tuple[Trace, dict[str, Any]]:
    """Convert one rank (ET and/or Kineto already loaded) into a Trace and its summary.

    With `writer`, nodes are streamed into it as they are made and the returned Trace holds none
    (bounded memory for big traces); with `columns`, they are recorded there instead (for the
    profiler-cost passes, which then write them: columns.RankColumns), likewise. `release`
    empties `kf`'s event lists once they are read (the caller is done with them), so their
    memory is reused for the graph. The cyclic GC is paused
    meanwhile: the parsed JSON is millions of live objects, and every generation-2 pass would walk
    them all for nothing. `job` carries the job-wide placement of gloo collectives on process
    groups (see `GlooJob`); without it a rank's gloo threads are placed from its own trace.
    """
    return _convert_rank(et, kf, rank, options or Options(), writer, release, job, columns)


def _convert_rank(
    et: Optional[ETFile],
    kf: Optional[KinetoFile],
    rank: int,
    options: Options,
    writer: Optional[TraceWriter],
    release: bool,
    job: Optional[GlooJob] = None,
    columns: Optional[RankColumns] = None,
) -> tuple[Trace, dict[str, Any]]:
    t0 = time.perf_counter()
    stats: dict[str, Any] = {"rank": rank, "warnings": []}
    if et is not None:
        ops = et.ops
        stats.update(et=et.path, schema=et.schema, et_nodes=len(ops) + et.roots)
        if et.repaired:
            stats["warnings"].append(f"{et.path}: unterminated ET repaired (cut at the last complete node)")
        ext_to_op = link_et(ops, kf, stats) if kf is not None else {}
        if kf is not None and stats["et_ops_with_rf_id"] and stats["link_rate"] < 0.5:
            stats["warnings"].append(_link_warning(et.path, kf.path, stats))
        dropped = Counter({"process/thread root node": et.roots}) if et.roots else Counter()
    else:
        assert kf is not None
        ops, ext_to_op = ops_from_kineto(kf)
        stats.update(et=None, schema=None)
        dropped = Counter()
    if kf is not None:
        stats["kineto"] = kf.path
        if kf.repaired:
            stats["warnings"].append(f"{kf.path}: unterminated Kineto trace repaired (cut at the last complete event)")
        add_gpu_ops(ops, kf, ext_to_op, stats)
    _roofline_to_kernels(ops)
    pgs = _process_groups(et, kf)
    if et is not None and et.pg_init and not options.metadata_node:
        for op in et.pg_init:  # nothing depends on it (the builder emits it on its own)
            ops.pop(op.id, None)
        dropped["process_group:init METADATA node (--metadata-node keeps it)"] += len(et.pg_init)
    world = int((kf.distributed.get("world_size") if kf is not None else 0) or _world_from_pgs(pgs))
    thread_groups = job.placed.get(rank) if job is not None else None
    comm_stats = map_comms(ops, rank, pgs, thread_groups, world, job.p2p.get(rank) if job is not None else None)
    if job is not None and comm_stats.survey is not None:
        job.surveys[rank] = comm_stats.survey
        if job.survey_only or (job.defer and thread_groups is None and needs_solving(comm_stats.survey)):
            return Trace(metadata=pb.GlobalMetadata(), nodes=[], rank=rank), {"rank": rank, "deferred": True}
    stats["warnings"].extend(comm_stats.group_warnings)
    stats.update(comm_stats.as_dict())
    merged = comm_stats.merged
    for m in merged:
        del ops[m.id]
    if merged:
        dropped["executor merged into its collective's comm node"] += len(merged)
    timed = kf is not None
    builder = Builder(ops, timed, int(options.gap_min_us * 1000), stats)
    sync_events = []
    if kf is not None:
        sync_events = _sync_events(kf)
        if release:  # every Kineto event has been read: free them before the graph is built
            kf.cpu, kf.gpu, kf.runtime, kf.sync = [], [], [], []
    items = builder.build(sync_events)
    try:
        items = ordered(items, builder.edges_in_order)
    except CycleError:
        # Safety net: wait/sync edges are inferred from times; drop them rather than emit a cycle.
        for ex, seg in builder.wait_edges:
            if ex.id in seg.data:
                seg.data.remove(ex.id)
            seg.wait_from = seg.start
        stats["warnings"].append("wait/sync edges removed: they formed a dependency cycle")
        items = ordered(items)
    md = make_metadata(
        source="chakra.converters.pytorch",
        rank=rank,
        world_size=world,
        schema=et.schema if et is not None else None,
        pid=et.pid if et is not None else (kf.pid if kf is not None else None),
        time=et.time if et is not None else None,
        start_ts=et.start_ts if et is not None else None,
        finish_ts=et.finish_ts if et is not None else None,
        timed=timed,
    )
    stats["process_groups"] = _group_members(pgs, world)
    nodes: list = []
    if writer is not None:
        writer.write_metadata(md)
    encoder = NodeEncoder(options.io, builder.next_id, columns)
    for i in range(0, len(items), 4096):
        batch = encoder.encode_batch(items[i : i + 4096])
        if columns is not None:
            continue  # the encoder recorded the nodes there
        if writer is not None:
            writer.write_serialized(batch)
        else:
            nodes.extend(map(pb.Node.FromString, batch))
    if columns is not None:
        columns.metadata = md
        columns.settle()
    trace = Trace(metadata=md, nodes=nodes, rank=rank)
    stats["span_us"] = (encoder.t_hi - encoder.t_lo) if encoder.t_lo is not None else 0
    _summarise(stats, encoder.types, list(ops.values()), dropped, timed)
    stats["seconds"] = round(time.perf_counter() - t0, 3)
    return trace, stats


def _link_warning(et_path: str, kineto_path: str, stats: dict[str, Any]) -> str:
    """Few ET ops link to the Kineto trace. When most ids find an event of ANOTHER name, the two
    were recorded over different iterations (ids count every op since the profiler started, so
    another step shifts them): say so, and flag it in the summary (`iterations_differ`)."""
    linked, total, key = stats["linked"], stats["et_ops_with_rf_id"], stats["link_key"]
    if stats["link_name_mismatch"] > linked:
        stats["iterations_differ"] = True
        return (
            f"{et_path} and {kineto_path} were recorded over different iterations: only {linked} of {total} "
            f"ET ops link by name ({key}), {stats['link_name_mismatch']} find an op of another name under "
            "their id; unlinked ops have no Kineto time (placed after the last linked one), so record "
            "both over the same steps for a timed trace"
        )
    return (
        f"only {linked} of {total} ET ops link to {kineto_path} by name ({key}); "
        "were both traces taken over the same steps?"
    )


def _sync_events(kf: KinetoFile) -> list[KEvent]:
    """Host-side sync calls: cuda_sync records (GPU-side tid) moved onto their runtime call's thread/time."""
    by_corr = {r.args.get("correlation"): r for r in kf.runtime if r.name in SYNC_RUNTIME}
    out = []
    for e in kf.sync:
        r = by_corr.pop(e.args.get("correlation"), None)
        if r is not None:
            out.append(KEvent(e.cat, r.name, r.ts, r.end, r.pid, r.tid, e.args))
    out.extend(by_corr.values())  # sync calls without a cuda_sync record: wait on every stream
    return out


def _roofline_to_kernels(ops: dict) -> None:
    """GPU kernels inherit their launching aten op's FLOPs/bytes, shared by duration."""
    groups: dict[int, list] = {}
    for op in ops.values():
        if op.kind == GPU and op.launcher is not None and op.launcher.flops:
            groups.setdefault(op.launcher.id, []).append(op)
    for kernels in groups.values():
        launcher = kernels[0].launcher
        total = sum(max(k.end - k.ts, 1) for k in kernels)
        for k in kernels:
            share = max(k.end - k.ts, 1) / total
            k.flops = int(launcher.flops * share)
            k.bytes = int(launcher.bytes * share)


def _process_groups(et: Optional[ETFile], kf: Optional[KinetoFile]) -> list[dict]:
    if et is not None:
        for op in et.pg_init:
            if op.inputs and op.inputs[0]:
                groups = comms.parse_process_groups(op.inputs[0][0])
                if groups:
                    return _checked_groups(groups, et.path, f"node {op.id} ({op.name})")
    if kf is not None:
        cfg = kf.distributed.get("pg_config")
        if isinstance(cfg, list):
            return _checked_groups([g for g in cfg if isinstance(g, dict)], kf.path, "distributedInfo.pg_config")
    return []


class _Group(msgspec.Struct):
    """The process-group fields later steps read (rank lists map group ranks to global ones)."""

    pg_name: Union[str, int, None] = None
    ranks: Optional[list[Annotated[int, msgspec.Meta(ge=0, lt=1 << 31)]]] = None
    group_size: Optional[Annotated[int, msgspec.Meta(ge=0, lt=1 << 31)]] = None
    pg_size: Optional[Annotated[int, msgspec.Meta(ge=0, lt=1 << 31)]] = None


def _group_members(pgs: list[dict], world: int) -> dict[str, list[int]]:
    """pg_name -> ranks; PyTorch lists the default group with `"ranks": []`, meaning every rank."""
    out = {}
    for g in pgs:
        name, ranks = g.get("pg_name"), g.get("ranks")
        if name is None or not isinstance(ranks, list):
            continue
        if not ranks and world:
            ranks = list(range(world))
        if ranks and all(isinstance(r, int) for r in ranks):
            out[str(name)] = [int(r) for r in ranks]
    return out


def _checked_groups(groups: list[dict], path: str, where: str) -> list[dict]:
    try:
        msgspec.convert(groups, list[_Group])
    except msgspec.ValidationError as exc:
        raise TraceFormatError(path, f"{where}: process groups: {exc}") from None
    return groups


def _world_from_pgs(pgs: list[dict]) -> int:
    sizes = [int(g.get("group_size") or g.get("pg_size") or 0) for g in pgs]
    return max(sizes, default=0)


_KIND = attrgetter("kind")


def _summarise(stats: dict, type_counts: Counter, ops: list, dropped: Counter, timed: bool) -> None:
    """`ops`: every op that became a node (the builder makes one item per op)."""
    by_type = Counter({node_type_name(k): v for k, v in type_counts.items()})
    stats["nodes"] = sum(type_counts.values())
    stats["nodes_by_type"] = dict(sorted(by_type.items()))
    kinds = Counter(map(_KIND, ops))
    stats["cpu_ops"] = kinds[CPU]
    stats["gpu_ops"] = kinds[GPU]
    stats["p2p"] = {
        "send": by_type.get(node_type_name(NodeType.COMM_SEND_NODE), 0),
        "recv": by_type.get(node_type_name(NodeType.COMM_RECV_NODE), 0),
    }
    stats["dropped"] = dict(dropped)
    stats["durations"] = "from Kineto" if timed else "none (no Kineto trace): every duration is 0"
    if not timed:
        stats["warnings"].append("no Kineto trace: durations and start times are 0")
    if stats.get("unknown"):
        total = sum(stats["unknown"].values())
        stats["warnings"].append(f"{total} comm-like op(s) of unknown kind kept as compute: {sorted(stats['unknown'])}")
    steps = {}
    for op in [op for op in ops if op.name.startswith("ProfilerStep#")]:
        if op.kind == CPU and op.end is not None:
            steps[op.name] = round((op.end - op.ts) / 1000, 1)
    if steps:
        stats["profiler_steps_us"] = steps


# ---------------------------------------------------------------------------------------------
# Files and ranks


def classify(name: str, raw: bytes) -> str:
    head = raw[:65536]
    if sniff_et_head(head):
        return "et"
    if sniff_kineto_head(head):
        return "kineto"
    raise TraceFormatError(name, "neither a PyTorch Execution Trace nor a Kineto trace (unknown JSON layout)")


def _read_split(
    paths: Sequence[Path], kineto_paths: Sequence[Path]
) -> tuple[list[tuple[str, Any]], list[tuple[str, Any]]]:
    """Read every input: (ETs, Kineto traces) as (name, raw). `paths` may hold either kind (told
    apart by content); `kineto_paths` must be Kineto traces."""
    ets: list[tuple[str, Any]] = []
    kins: list[tuple[str, Any]] = []
    for path in paths:
        for name, raw in read_input_bytes(Path(path)):
            (ets if classify(name, raw) == "et" else kins).append((name, raw))
    for path in kineto_paths:
        for name, raw in read_input_bytes(Path(path)):
            if classify(name, raw) != "kineto":  # -k, or `convert kineto`
                raise TraceFormatError(
                    name,
                    "a PyTorch Execution Trace, not a Kineto trace: convert it with `chakra convert pytorch` "
                    "(with its Kineto trace after -k)",
                )
            kins.append((name, raw))
    return ets, kins


def gather_inputs(et_paths: Sequence[Path], kineto_paths: Sequence[Path]) -> list[RankInput]:
    """Read every input and pair ETs with Kineto traces by rank."""
    ets, kins = _read_split(et_paths, kineto_paths)
    if not ets and not kins:
        raise InputError("no input files")
    et_ranks = _assign_ranks([n for n, _ in ets], None)
    kin_ranks = _assign_ranks([n for n, _ in kins], [kineto_rank(raw) for _, raw in kins])
    if ets and kins:
        if len(ets) == 1 and len(kins) == 1:
            # One pair: Kineto's distributedInfo decides, but a rank spelled in the ET's name
            # (et.1.json, trace_rank1.json) must agree with it: a mix-up of two ranks' files links
            # (DDP ranks look alike) and would silently give a wrong trace.
            recorded, named_rank = kineto_rank(kins[0][1]), stated_rank(ets[0][0])
            if recorded is not None and named_rank is not None and recorded != named_rank:
                raise InputError(
                    f"ranks do not pair: {ets[0][0]} is rank {named_rank} by its name but {kins[0][0]} "
                    f"is rank {recorded} (distributedInfo)"
                )
            et_ranks = kin_ranks = [recorded if recorded is not None else et_ranks[0]]
        if sorted(et_ranks) != sorted(kin_ranks):
            raise InputError(
                f"ranks do not pair: ET files give ranks {sorted(et_ranks)}, Kineto files give {sorted(kin_ranks)}"
            )
    out: dict[int, RankInput] = {}
    for (name, raw), r in zip(ets, et_ranks):
        out[r] = RankInput(r, et=name, et_raw=raw)
    for (name, raw), r in zip(kins, kin_ranks):
        ri = out.setdefault(r, RankInput(r))
        ri.kineto, ri.kineto_raw = name, raw
    return [out[r] for r in sorted(out)]


def _assign_ranks(names: list[str], known: Optional[list[Optional[int]]]) -> list[int]:
    if not names:
        return []
    if known and all(k is not None for k in known) and len(set(known)) == len(known):
        return [int(k) for k in known]  # type: ignore[arg-type]
    if len(names) == 1:
        return [known[0] if known and known[0] is not None else 0]
    ranks = [rank_of_name(n) for n in names]
    if any(r is None for r in ranks) or len(set(ranks)) != len(ranks):
        raise InputError(f"cannot tell the ranks of {names} apart: name files like et.<rank>.json")
    return ranks  # type: ignore[return-value]


#: `Options.overhead` modes that run the profiler-cost pass on a timed (Kineto) rank.
_OVERHEAD_MODES = ("remove", "estimate", "keep")


def _convert_one(
    ri: RankInput,
    out_path: str,
    options: Options,
    job: Optional[GlooJob] = None,
    held: Optional[dict[str, tuple[Trace, Any]]] = None,
) -> dict[str, Any]:
    """Worker: convert one rank and write it to `out_path` (atomic). Returns the summary or an error.

    With `job` (several ranks), the summary also holds `gloo_survey` (the rank's gloo threads, see
    `GlooJob`) and, for a rank deferred until the job-wide placement is known, `deferred` (nothing
    written). With `held` (one rank, converted in this process), a timed rank is not written: its
    Trace stays in memory for the profiler-cost passes, `held[out_path] = (trace, node facts)`,
    and the caller writes it once they are done (rather than writing, reading back and rewriting
    it for each pass). When the passes remove the profiler's cost, the rank is held as the
    converter's own columns (`columns.RankColumns`: no file written and read back, no protobuf
    node made) and written from them."""
    try:
        gc_was = gc.isenabled()
        gc.disable()  # see convert_rank
        try:
            if ri.et_raw is not None and is_etplus(ri.et_raw):
                if ri.kineto_raw is not None:
                    raise InputError(
                        f"{ri.et}: a linked ET+ (chakra_trace_link output) already holds its Kineto figures: "
                        f"convert it alone, without {ri.kineto}"
                    )
                et, kf = load_etplus(ri.et, ri.et_raw, keep_io=options.io)
                ri.et_raw = None
            else:
                et = load_et(ri.et, ri.et_raw, keep_io=options.io) if ri.et_raw is not None else None
                ri.et_raw = None
                kf = load_kineto(ri.kineto, ri.kineto_raw) if ri.kineto_raw is not None else None
            ri.kineto_raw = None
            hold = held is not None and kf is not None and options.overhead in _OVERHEAD_MODES
            # the passes that remove the profiler's cost work on the converter's own columns (the
            # rank is written once they are done); keeping the recorded times, or replaying them
            # for the report, reads the rank back from its file instead
            columns = RankColumns() if hold and options.overhead != "keep" and not options.overhead_replay else None
            if columns is not None:
                _, stats = convert_rank(et, kf, ri.rank, options, release=True, job=job, columns=columns)
                del et, kf
                trace = Trace(metadata=columns.metadata, nodes=[], rank=ri.rank)
            else:
                w = TraceWriter(out_path)
                try:
                    _, stats = convert_rank(et, kf, ri.rank, options, writer=w, release=True, job=job)
                except BaseException:
                    w.abort()
                    raise
                if stats.get("deferred"):
                    w.abort()
                else:
                    w.close()
            if hold and columns is None:
                # read back once (the file streamed out, so the converter's objects and the whole
                # output were never in memory together); both passes then work on this Trace
                del et, kf
                trace, messages = _read_back(out_path, ri.rank)
        finally:
            if gc_was:
                gc.enable()
        if job is not None and ri.rank in job.surveys:
            stats["gloo_survey"] = job.surveys[ri.rank].as_tuple()
        if options.overhead in _OVERHEAD_MODES and stats.get("durations") == "from Kineto":
            if hold:
                from chakra.converters.pytorch.overhead import column_facts, node_facts

                if columns is not None:
                    # the rank's estimate waits for `job_overhead`: where a measured step is fitted
                    # instead, the estimate's only trace in the output is which nodes it marked
                    facts = [column_facts(columns)]
                    stats["profiler_overhead"] = None
                else:
                    facts = node_facts([trace], [messages])
                    del messages
                    stats["profiler_overhead"] = _overhead_of(trace, options, facts)
                held[out_path] = (trace, facts)  # type: ignore[index]
            else:
                stats["profiler_overhead"] = _rank_overhead(out_path, ri.rank, options)
        stats["output"] = out_path
        return stats
    except ChakraError as exc:
        return {"error": str(exc)}
    except OSError as exc:  # output folder not writable, disk full, ...
        return {"error": str(write_error(out_path, exc))}


def _read_back(path: str, rank: int) -> tuple[Trace, list[bytes]]:
    """A rank file just written: its Trace, and its nodes' serialized messages (each with its
    length prefix) for `overhead.node_facts`. One upb call per batch (chakra.io.NodeBatch)."""
    from chakra.io import NodeBatch, iter_payload_batches

    messages: list[bytes] = []
    nodes: list[Any] = []
    metadata = None
    for _, _, framed in iter_payload_batches(path):
        if metadata is None:
            first = framed[0]
            k = next(i for i, b in enumerate(first) if b < 0x80) + 1  # past the length prefix
            metadata = pb.GlobalMetadata.FromString(first[k:])
            framed = framed[1:]
        if framed:
            nodes.extend(NodeBatch.FromString(b"\x0a" + b"\x0a".join(framed)).nodes)
            messages.extend(framed)
    return Trace(metadata=metadata if metadata is not None else pb.GlobalMetadata(), nodes=nodes, rank=rank), messages


def convert_rank_files(
    rank: int,
    paths: Sequence[Path],
    kineto_paths: Sequence[Path],
    out_path: Path,
    options: Optional[Options] = None,
    job: Optional[GlooJob] = None,
) -> dict[str, Any]:
    """Convert ONE rank given by file names, reading the files here (a batch worker's whole job).

    `paths` may hold the ET and/or its Kineto trace (told apart by content); `kineto_paths` must be
    Kineto traces. The rank comes from the caller (file names); a Kineto trace whose
    distributedInfo names another rank is refused, as in `gather_inputs`. Writes `out_path`
    atomically and returns the summary, or `{"error": ...}` (nothing written). `job`: as in
    `_convert_one` (the job-wide gloo placement, or a survey pass writing nothing).
    """
    try:
        ets, kins = _read_split(paths, kineto_paths)
        if len(ets) > 1 or len(kins) > 1:
            names = [n for n, _ in ets] if len(ets) > 1 else [n for n, _ in kins]
            raise InputError(f"rank {rank}: several files of one kind ({', '.join(names)}); one ET and one Kineto each")
        if not ets and not kins:
            raise InputError(f"rank {rank}: no input files")
        ri = RankInput(rank)
        if ets:
            ri.et, ri.et_raw = ets[0]
        if kins:
            ri.kineto, ri.kineto_raw = kins[0]
            stated = kineto_rank(bytes(kins[0][1][:200000]))
            if stated is not None and stated != rank:
                raise InputError(f"{kins[0][0]}: is rank {stated} (distributedInfo) but its file name says rank {rank}")
    except ChakraError as exc:
        return {"error": str(exc)}
    return _convert_one(ri, str(out_path), options or Options(), job)


def _plain_bytes(raw: Any) -> Optional[bytes]:
    return raw if raw is None or isinstance(raw, bytes) else bytes(raw)


def convert_files(
    et_paths: Sequence[Path],
    kineto_paths: Sequence[Path],
    prefix: Path,
    options: Optional[Options] = None,
) -> list[dict[str, Any]]:
    """Convert every rank and write PREFIX.<rank>.et; returns one summary per rank."""
    options = options or Options()
    inputs = gather_inputs(et_paths, kineto_paths)
    finals = [rank_path(prefix, ri.rank) for ri in inputs]
    tmp_paths = [str(temp_path(final)) for final in finals]
    for final in finals:  # refuse a bad output before any work; drop what a killed run left
        check_output_path(final)
        remove_stale_temps(final)
    results: list[dict[str, Any]]
    try:
        held: dict[str, tuple[Trace, Any]] = {}
        if len(inputs) == 1:
            results = [_convert_one(inputs[0], tmp_paths[0], options, held=held)]
        else:
            for ri in inputs:  # memory-mapped inputs cannot be pickled to the workers
                ri.et_raw = _plain_bytes(ri.et_raw)
                ri.kineto_raw = _plain_bytes(ri.kineto_raw)
            workers = options.jobs or min(len(inputs), os.cpu_count() or 1)
            # Imported for several ranks only: multiprocessing costs ~25 ms of every start-up.
            from concurrent.futures import ProcessPoolExecutor

            # Workers die with this process: a SIGKILLed convert leaves no pool behind.
            pool_of = ProcessPoolExecutor(max(1, workers), initializer=pool_worker_init, initargs=(os.getpid(),))
            with pool_of as pool:
                first = GlooJob(defer=True)
                futures = [pool.submit(_convert_one, ri, p, options, first) for ri, p in zip(inputs, tmp_paths)]
                results = [f.result() for f in futures]
                surveys = [Survey.from_tuple(r.pop("gloo_survey")) for r in results if "gloo_survey" in r]
                deferred = [i for i, r in enumerate(results) if r.get("deferred")]
                if deferred and not any("error" in r for r in results):
                    # gloo collectives some rank could not place alone: place them job-wide, then
                    # convert those ranks again (from the same input bytes, still held here)
                    placed, warnings = solve(surveys)
                    job = GlooJob(placed=placed, p2p=solve_p2p(surveys))
                    again = {i: pool.submit(_convert_one, inputs[i], tmp_paths[i], options, job) for i in deferred}
                    for i, f in again.items():
                        results[i] = f.result()
                        results[i].pop("gloo_survey", None)
                        if "error" not in results[i]:
                            results[i]["warnings"].extend(warnings)
        # A worker names the temporary file it wrote; the user knows only the output.
        errors = [_name_output(r["error"], tmp_paths, finals) for r in results if "error" in r]
        if errors:
            raise ChakraError(errors[0] + (f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""))
        _finish_ranks(tmp_paths, results, [*et_paths, *kineto_paths], options, held)
        groups: dict[str, list[int]] = {}
        for res in results:
            groups.update(res.get("process_groups") or {})
        # All or nothing: the workers' rank files and the comm-group file are one output set
        # (renamed in that order, so the group file appears last, as a finished set's marker).
        with output_set():
            for tmp, final in zip(tmp_paths, finals):
                adopt_output(tmp, final)
            written = write_comm_groups(prefix, groups)
        for res, final in zip(results, finals):
            res["output"] = str(final)
        if written is not None:
            for res in results:
                res["comm_groups"] = str(written)
        return results
    finally:
        for tmp in tmp_paths:
            with contextlib.suppress(OSError):
                os.unlink(tmp)


@without_gc
def _finish_ranks(
    paths: Sequence[str],
    results: list[dict],
    inputs: Sequence[Path],
    options: Options,
    held: dict[str, tuple[Trace, Any]],
) -> None:
    """`job_overhead`, then write the ranks still `held` in memory. The cyclic GC is paused, as in
    `convert_rank`: the passes run over a rank's columns or nodes (hundreds of thousands of live
    objects), which its sweeps would walk for nothing."""
    job_overhead(paths, results, inputs, options, held)
    for tmp, (trace, facts) in held.items():
        if facts and facts[0].columns is not None:
            facts[0].columns.write(tmp)
        else:
            _rewrite(tmp, trace)


def _rewrite(path: Union[str, Path], trace: Trace) -> None:
    """Write `trace` over the temporary file `path` (read before, so it counts as an input)."""
    from chakra.io import write_trace

    fresh = temp_path(path)
    try:
        write_trace(fresh, trace)
        os.replace(fresh, path)
    finally:
        with contextlib.suppress(OSError):
            os.unlink(fresh)


def _rank_overhead(path: str, rank: int, options: Options) -> dict[str, Any]:
    """One rank's profiler cost, estimated from its own trace (or kept, `--profiled`): a pass with
    no simulation, the same in a batch worker as here. A measured step time is fitted afterwards
    over the whole job (`job_overhead`)."""
    from chakra.io import read_trace

    trace = read_trace(path, rank=rank)
    rep = _overhead_of(trace, options)
    _rewrite(path, trace)
    return rep


def _overhead_of(trace: Trace, options: Options, facts: Any = None) -> dict[str, Any]:
    """`_rank_overhead` on a Trace in memory (`facts`: its `overhead.node_facts`, kept current)."""
    from chakra.converters.pytorch import overhead

    if options.overhead == "keep":
        return overhead.keep_recorded([trace]).as_dict()
    return overhead.remove_overhead([trace], facts=facts).as_dict()


def job_overhead(
    paths: Sequence[str],
    results: list[dict],
    inputs: Sequence[Path],
    options: Options,
    held: Optional[dict[str, tuple[Trace, Any]]] = None,
) -> None:
    """The whole job's part, once every rank is written to `paths` (the plain path's temporary
    files, the batch path's outputs): fit the profiler's cost to a measured step time
    (`--step-time`, else a manifest beside the inputs), which simulates every rank together; or,
    when asked (`overhead_replay`), replay the profiled and the converted job for the report.
    `held`: ranks still in memory (`_convert_one`), changed in place and left for the caller to write."""
    if options.overhead not in ("remove", "estimate", "keep") or any(
        r.get("durations") != "from Kineto" for r in results
    ):
        return
    from chakra.converters.pytorch import overhead
    from chakra.io import read_trace
    from chakra.record.manifest import find_truth

    measured, source = options.step_time_ns, "--step-time"
    cautions: tuple[str, ...] = ()
    if measured is None and options.overhead == "remove":
        truth = find_truth(inputs)
        if truth is not None:
            measured, source, cautions = truth.step_ns, truth.source, truth.cautions
    held = held or {}
    # ranks held in columns whose own estimate was left for here (`_convert_one`)
    pending = [(p, r) for p, r in zip(paths, results) if p in held and r.get("profiler_overhead", {}) is None]
    if measured is None or options.overhead == "keep":
        for p, r in pending:
            r["profiler_overhead"] = _overhead_of(held[p][0], options, held[p][1])
        pending = []
    several = len(paths) > 1 and options.overhead != "keep"
    if measured is None and not options.overhead_replay and not several:
        return
    traces = [held[p][0] if p in held else read_trace(p, rank=r["rank"]) for p, r in zip(paths, results)]
    facts = [held[p][1][0] for p in paths] if held and all(p in held for p in paths) else None

    def rewrite() -> None:
        for p, t in zip(paths, traces):
            if p not in held:
                _rewrite(p, t)

    if measured is not None and options.overhead != "keep":
        rep = overhead.remove_overhead(
            traces, measured, measured_source=source, replay=options.overhead_replay, notes=cautions, facts=facts,
            estimate_marks=bool(pending),
        )  # fmt: skip
        rewrite()
        for r in results:
            r["profiler_overhead"] = rep.as_dict()
        return
    # A job's collectives wait for their peers: those waits follow the other ranks' (converted)
    # host time, so they are rebuilt over the whole job (overhead.CollectiveWaits).
    if several and overhead.rebuild_waits(traces):
        rewrite()
        for r in results:
            r["profiler_overhead"]["notes"] = [*r["profiler_overhead"].get("notes", []),
                "collectives' waits for their peers rebuilt from the converted schedule"]  # fmt: skip
    if not options.overhead_replay:
        return
    predicted = overhead.simulated_step_ns(traces)
    # the profiled replay puts the recorded durations back; a rank held in memory is written
    # after this, so it gets its converted ones again (a file here was written before)
    converted = {i: [n.duration_micros for n in traces[i].nodes] for i, p in enumerate(paths) if p in held}
    overhead.restore_profiled(traces)
    profiled = overhead.simulated_step_ns(traces)
    for i, durations in converted.items():
        for n, d in zip(traces[i].nodes, durations):
            n.duration_micros = d
    for r in results:
        r["profiler_overhead"].update(predicted_step_ns=predicted, replay_profiled_ns=profiled)


def _name_output(message: str, tmps: Sequence[str], finals: Sequence[Path]) -> str:
    for tmp, final in zip(tmps, finals):
        message = message.replace(tmp, str(final))
    return message


__all__ = ["Options", "convert_rank", "convert_files", "convert_rank_files", "gather_inputs", "COMM"]
