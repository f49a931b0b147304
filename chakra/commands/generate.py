"""`chakra generate`: write multi-rank traces from a spec file or a built-in parallel workload."""

from __future__ import annotations

import time
from enum import Enum
from pathlib import Path
from typing import Any, Optional

import typer

from chakra.cli_common import JsonOption, MetadataNodeOption, QuietOption, console, handle_errors, info, print_json


class MLPMode(str, Enum):
    mp = "mp"
    dp_mp = "dp-mp"
    mp_dp = "mp-dp"


OutputOption = typer.Option(
    ..., "--output", "-o", help="Output PREFIX: writes PREFIX.<rank>.et (+ PREFIX.comm_groups.json)."
)
TflopsOption = typer.Option(100.0, "--tflops", help="Device peak compute (TFLOP/s) for roofline durations.")
MemBwOption = typer.Option(2000.0, "--mem-bw", help="Device memory bandwidth (GB/s, decimal) for roofline durations.")

app = typer.Typer(
    name="generate",
    help="Generate multi-rank Chakra traces: from a spec file (YAML or Python) or a built-in workload.\n\n"
    "Every compute node carries num_ops (FLOPs) and tensor_size (bytes) and a duration from a roofline "
    "device model (--tflops, --mem-bw). Also writes PREFIX.comm_groups.json for ASTRA-sim's "
    "--comm-group-configuration. See docs/dsl.md.",
    no_args_is_help=True,
    rich_markup_mode="rich",
)


SPEC_HELP = (
    "Generate from a declarative spec. See docs/dsl.md for the format.\n\n"
    "A .py spec is your own code: it is imported and its build() must return a chakra.dsl.Workload. A "
    "YAML spec is data only (ranks, groups, ops).\n\n"
    "Example: chakra generate spec examples/two_stage_pipeline.yaml -o out/pipe"
)

MICROBENCH_HELP = (
    "One collective of each type at each size of a sweep, back to back on all ranks.\n\n"
    "ASTRA-sim simulates only all_reduce, all_gather, reduce_scatter and all_to_all (broadcast by "
    "duration): pick those with --type for it.\n\n"
    "Example: chakra generate microbench --ranks 16 --min-size 1KiB --max-size 1GiB -o out/mb"
)

TRANSFORMER_HELP = (
    "A GPT-style training step with data, tensor and pipeline parallelism (ranks = dp x tp x pp).\n\n"
    "Tensor-parallel all-reduces per layer (reduce-scatter/all-gather with --sequence-parallel), 1F1B "
    "pipeline send/recv, gradient all-reduce or ZeRO reduce-scatter/all-gather on the data-parallel "
    "groups.\n\n"
    "Example: chakra generate transformer --layers 32 --hidden 4096 --heads 32 --dp 4 --tp 8 --pp 4 "
    "--batch 64 --microbatches 8 --zero 1 -o out/gpt"
)


def _device(tflops: float, mem_bw: float):
    from chakra.dsl.device import Device
    from chakra.dsl.workload import DSLError

    try:
        return Device(tflops=tflops, mem_bw=mem_bw)
    except ValueError as exc:
        raise DSLError(str(exc)) from None


def _finish(
    workload,
    output: Path,
    started: float,
    quiet: bool,
    as_json: bool,
    extra: Optional[dict] = None,
    metadata_node: bool = False,
) -> None:
    """Save, then report what was written (and the closed-form figures when the workload has them)."""
    from chakra.commgroups import comm_groups_path

    info(f"writing {workload.num_ranks} rank trace(s) to {output}.<rank>.et", quiet)
    paths = workload.save(output, metadata_node=metadata_node)
    summary: dict[str, Any] = {
        "workload": workload.name,
        "ranks": workload.num_ranks,
        "nodes": workload.node_count(metadata_node=metadata_node),
        "process_groups": len(workload.groups),
        "flops": workload.total_flops(),
        "files": [str(p) for p in paths],
        # written only for groups other than the world (ASTRA-sim's id 0 needs no entry)
        "comm_groups": str(groups_file) if (groups_file := comm_groups_path(output)).exists() else None,
        "seconds": round(time.perf_counter() - started, 3),
    }
    if extra:
        summary.update(extra)
    if as_json:
        print_json(summary)
        return
    from rich.table import Table

    table = Table(title=f"generated {workload.name}", show_header=False)
    for key in ("ranks", "nodes", "process_groups"):
        table.add_row(key, f"{summary[key]:,}")
    table.add_row("FLOPs (sum of num_ops)", f"{summary['flops']:.4g}")
    for key, value in (extra or {}).items():
        table.add_row(key, f"{value:.4g}" if isinstance(value, float) else str(value))
    table.add_row("output", f"{output}.0.et .. {output}.{workload.num_ranks - 1}.et")
    table.add_row("comm groups", summary["comm_groups"] or "none beyond all ranks: no comm_groups.json written")
    table.add_row("time", f"{summary['seconds']:.2f} s")
    console.print(table)


@app.command("spec", help=SPEC_HELP)
def spec_cmd(
    spec: Path = typer.Argument(..., help="A .yaml/.yml/.json spec (data) or a .py file defining build()."),
    output: Path = OutputOption,
    metadata_node: bool = MetadataNodeOption,
    quiet: bool = QuietOption,
    as_json: bool = JsonOption,
) -> None:
    """Generate from a declarative spec. See docs/dsl.md for the format."""
    with handle_errors():
        from chakra.dsl.spec import load_spec

        started = time.perf_counter()
        workload = load_spec(spec)
        _finish(workload, output, started, quiet, as_json, metadata_node=metadata_node)


@app.command("microbench", help=MICROBENCH_HELP)
def microbench_cmd(
    ranks: int = typer.Option(8, "--ranks", "-n", help="Number of ranks."),
    min_size: str = typer.Option("1KiB", "--min-size", help="Smallest message (bytes or 4KiB, 1MiB...)."),
    max_size: str = typer.Option("64MiB", "--max-size", help="Largest message."),
    factor: int = typer.Option(4, "--factor", help="Size step factor of the sweep."),
    types: Optional[list[str]] = typer.Option(
        None, "--type", "-t", help="Collective type(s) to include (default: all)."
    ),
    output: Path = OutputOption,
    metadata_node: bool = MetadataNodeOption,
    quiet: bool = QuietOption,
    as_json: bool = JsonOption,
) -> None:
    """One collective of each type at each size of a sweep, back to back on all ranks."""
    with handle_errors():
        from chakra.dsl.builtins.microbench import build_microbench, size_sweep
        from chakra.dsl.spec import parse_quantity

        started = time.perf_counter()
        sizes = size_sweep(
            int(parse_quantity(min_size, "--min-size")), int(parse_quantity(max_size, "--max-size")), factor
        )
        workload = build_microbench(ranks, sizes, types)
        _finish(workload, output, started, quiet, as_json, extra={"sizes": len(sizes)}, metadata_node=metadata_node)


@app.command("mlp")
def mlp_cmd(
    mode: MLPMode = typer.Option(MLPMode.dp_mp, "--mode", help="mp, dp-mp (DP on dim 1, MP on dim 2) or mp-dp."),
    dim1: int = typer.Option(4, "--dim1", help="NPUs along network dimension 1."),
    dim2: int = typer.Option(4, "--dim2", help="NPUs along network dimension 2."),
    layers: int = typer.Option(6, "--layers"),
    hidden: int = typer.Option(4096, "--hidden"),
    batch: int = typer.Option(512, "--batch", help="Global batch size."),
    tflops: float = TflopsOption,
    mem_bw: float = MemBwOption,
    output: Path = OutputOption,
    metadata_node: bool = MetadataNodeOption,
    quiet: bool = QuietOption,
    as_json: bool = JsonOption,
) -> None:
    """The Chakra paper's MLP case study (6 layers; MP, DP-MP, MP-DP over a 2-D network).

    Example: chakra generate mlp --mode mp-dp --dim1 4 --dim2 8 -o out/mlp
    """
    with handle_errors():
        from chakra.dsl.builtins.mlp import MLPConfig, build_mlp

        started = time.perf_counter()
        cfg = MLPConfig(dim1=dim1, dim2=dim2, mode=mode.value, layers=layers, hidden=hidden, batch=batch)
        workload = build_mlp(cfg, _device(tflops, mem_bw))
        _finish(
            workload,
            output,
            started,
            quiet,
            as_json,
            extra={"closed_form_flops": float(cfg.flops())},
            metadata_node=metadata_node,
        )


@app.command("transformer", help=TRANSFORMER_HELP)
def transformer_cmd(
    layers: int = typer.Option(24, "--layers"),
    hidden: int = typer.Option(2048, "--hidden"),
    heads: int = typer.Option(16, "--heads"),
    seq: int = typer.Option(2048, "--seq", help="Sequence length."),
    batch: int = typer.Option(32, "--batch", help="Global batch in sequences."),
    microbatches: int = typer.Option(4, "--microbatches", help="Microbatches per data-parallel replica."),
    dp: int = typer.Option(1, "--dp", help="Data-parallel degree."),
    tp: int = typer.Option(1, "--tp", help="Tensor-parallel degree."),
    pp: int = typer.Option(1, "--pp", help="Pipeline-parallel degree (1F1B schedule)."),
    vocab: int = typer.Option(50257, "--vocab"),
    zero: int = typer.Option(0, "--zero", help="ZeRO stage 0-3 for the data-parallel dimension."),
    sequence_parallel: bool = typer.Option(False, "--sequence-parallel", help="Megatron sequence parallelism."),
    tflops: float = TflopsOption,
    mem_bw: float = MemBwOption,
    output: Path = OutputOption,
    metadata_node: bool = MetadataNodeOption,
    quiet: bool = QuietOption,
    as_json: bool = JsonOption,
) -> None:
    """A GPT-style training step with data, tensor and pipeline parallelism (ranks = dp x tp x pp)."""
    with handle_errors():
        from chakra.dsl.builtins.transformer import TransformerConfig, build_transformer

        started = time.perf_counter()
        cfg = TransformerConfig(
            layers=layers,
            hidden=hidden,
            heads=heads,
            seq=seq,
            batch=batch,
            microbatches=microbatches,
            dp=dp,
            tp=tp,
            pp=pp,
            vocab=vocab,
            zero=zero,
            sequence_parallel=sequence_parallel,
        )
        workload = build_transformer(cfg, _device(tflops, mem_bw))
        extra = {"params": cfg.params(), "6*params*tokens": float(6 * cfg.params() * cfg.batch * cfg.seq)}
        extra["closed_form_flops"] = float(cfg.model_flops())
        _finish(workload, output, started, quiet, as_json, extra=extra, metadata_node=metadata_node)


MOE_HELP = (
    "Mixture-of-experts layers with expert parallelism: per layer the dense part, a router, a dispatch "
    "all-to-all with per-peer sizes, the experts' FFN on the tokens each rank received, a combine "
    "all-to-all. Routing is drawn token by token from --imbalance (uniform, or zipf:S with exponent S), "
    "seeded by --seed. See docs/moe.md.\n\n"
    "Example: chakra generate moe --experts 16 --ranks 8 --imbalance zipf:1.2 --seed 1 -o out/moe"
)


@app.command("moe", help=MOE_HELP)
def moe_cmd(
    experts: int = typer.Option(8, "--experts", "-e", help="Experts in all (a multiple of --ranks)."),
    ranks: int = typer.Option(4, "--ranks", "-n"),
    imbalance: str = typer.Option("uniform", "--imbalance", help="Routing distribution: uniform | zipf:S."),
    seed: int = typer.Option(0, "--seed", help="Seed of the routing draws."),
    tokens: int = typer.Option(4096, "--tokens", help="Tokens per rank."),
    hidden: int = typer.Option(1024, "--hidden"),
    ffn: int = typer.Option(4096, "--ffn", help="Expert FFN inner width."),
    layers: int = typer.Option(2, "--layers"),
    top_k: int = typer.Option(1, "--top-k", help="Experts per token."),
    dtype_bytes: int = typer.Option(2, "--dtype-bytes"),
    tflops: float = TflopsOption,
    mem_bw: float = MemBwOption,
    output: Path = OutputOption,
    metadata_node: bool = MetadataNodeOption,
    quiet: bool = QuietOption,
    as_json: bool = JsonOption,
) -> None:
    with handle_errors():
        from chakra.dsl.builtins.moe import MoEConfig, build_moe, routing

        started = time.perf_counter()
        cfg = MoEConfig(
            ranks=ranks, experts=experts, tokens=tokens, hidden=hidden, ffn=ffn, layers=layers, top_k=top_k,
            imbalance=imbalance, seed=seed, dtype_bytes=dtype_bytes,
        )  # fmt: skip
        table = routing(cfg)
        workload = build_moe(cfg, _device(tflops, mem_bw), table)
        # the busiest expert rank's share of the tokens, per layer (1/N when balanced)
        hot = max(max(sum(r[j] for r in layer) for j in range(ranks)) / sum(map(sum, layer)) for layer in table)
        extra = {"closed_form_flops": cfg.flops(), "busiest rank's token share": round(hot, 4)}
        _finish(workload, output, started, quiet, as_json, extra=extra, metadata_node=metadata_node)


@app.command("dlrm")
def dlrm_cmd(
    ranks: int = typer.Option(8, "--ranks", "-n"),
    batch: int = typer.Option(2048, "--batch", help="Global batch size."),
    tables: int = typer.Option(26, "--tables", help="Embedding tables (spread round-robin over ranks)."),
    emb_dim: int = typer.Option(128, "--emb-dim"),
    pooling: int = typer.Option(1, "--pooling", help="Lookups per sample per table."),
    bottom: str = typer.Option(
        "512-256", "--bottom", help="Bottom MLP hidden widths (the last layer outputs emb-dim)."
    ),
    top: str = typer.Option("1024-1024-512-256-1", "--top", help="Top MLP widths."),
    tflops: float = TflopsOption,
    mem_bw: float = MemBwOption,
    output: Path = OutputOption,
    metadata_node: bool = MetadataNodeOption,
    quiet: bool = QuietOption,
    as_json: bool = JsonOption,
) -> None:
    """DLRM: model-parallel embeddings with all-to-all, data-parallel MLPs with all-reduce.

    Example: chakra generate dlrm --ranks 16 --tables 64 --batch 4096 -o out/dlrm
    """
    with handle_errors():
        from chakra.dsl.builtins.dlrm import DLRMConfig, build_dlrm
        from chakra.dsl.workload import DSLError

        started = time.perf_counter()
        try:
            bot = [int(x) for x in bottom.split("-") if x]
            tp_ = [int(x) for x in top.split("-") if x]
        except ValueError:
            raise DSLError("--bottom/--top take widths like 512-256-64") from None
        cfg = DLRMConfig(ranks=ranks, batch=batch, tables=tables, emb_dim=emb_dim, pooling=pooling, bottom=bot, top=tp_)
        workload = build_dlrm(cfg, _device(tflops, mem_bw))
        _finish(
            workload,
            output,
            started,
            quiet,
            as_json,
            extra={"closed_form_flops": float(cfg.flops())},
            metadata_node=metadata_node,
        )


COLLECTIVE_HELP = (
    "A custom collective algorithm for ASTRA-sim (`*-implementation-custom`): one PREFIX.<rank>.et per rank "
    "whose send/recv/reduce nodes are the algorithm; prints the system-config line that uses it.\n\n"
    "ALGORITHM: ring, direct, halving-doubling, binary-tree, double-binary-tree, hierarchical-2d, or a YAML "
    "description of the steps (see docs/custom-collectives.md).\n\n"
    "Example: chakra generate collective ring --ranks 8 --collective all-reduce --size 1MiB -o algos/ring8"
)


@app.command("collective", help=COLLECTIVE_HELP)
def collective_cmd(
    algorithm: str = typer.Argument(..., help="Textbook algorithm name, or a .yaml/.yml/.json description."),
    ranks: int = typer.Option(8, "--ranks", "-n", help="Ranks (members of the collective)."),
    collective: str = typer.Option(
        "all-reduce", "--collective", "-c", help="all-reduce, all-gather, reduce-scatter or all-to-all."
    ),
    size: str = typer.Option("1MiB", "--size", help="Bytes per rank of the collective (4KiB, 1MiB...)."),
    reduce_us: int = typer.Option(
        0, "--reduce-us", min=0, help="Each reduction's duration in us (0: ASTRA-sim's 1 ns)."
    ),
    dims: Optional[str] = typer.Option(None, "--dims", help="hierarchical-2d: COLUMNSxROWS (default: near square)."),
    output: Path = typer.Option(..., "--output", "-o", help="Output PREFIX: writes PREFIX.<rank>.et."),
    quiet: bool = QuietOption,
    as_json: bool = JsonOption,
) -> None:
    with handle_errors():
        from chakra.collective_algorithm import check
        from chakra.dsl.collectives import from_description, generate, system_line
        from chakra.dsl.spec import parse_quantity
        from chakra.errors import InputError

        started = time.perf_counter()
        nbytes = int(parse_quantity(size, "--size"))
        if algorithm.endswith((".yaml", ".yml", ".json")):
            alg = from_description(Path(algorithm))
        else:
            shape = None
            if dims:
                try:
                    a, b = (int(x) for x in dims.lower().split("x"))
                except ValueError:
                    raise InputError(f"--dims {dims!r}: expected COLUMNSxROWS, e.g. 4x2") from None
                shape = (a, b)
            alg = generate(algorithm, ranks, collective, nbytes, reduce_us, shape)
        report = check(alg)
        if not report.ok:
            raise InputError(f"{algorithm}: the algorithm is wrong: {report.problems[0]}")
        info(f"writing {alg.size} rank file(s) to {output}.<rank>.et", quiet)
        paths = alg.save(output)
        prefix = str(Path(output).resolve())
        line = system_line(alg.collective, prefix)
        summary = {
            "algorithm": alg.name,
            "collective": alg.collective,
            "ranks": alg.size,
            "messages": alg.messages(),
            "bytes_sent_per_rank_max": max(alg.bytes_sent()),
            "files": [str(p) for p in paths],
            "system_config": line,
            "checked": "moves the collective's data, no deadlock" if not report.notes else report.notes[0],
            "seconds": round(time.perf_counter() - started, 3),
        }
        if as_json:
            print_json(summary)
            return
        from rich.table import Table

        table = Table(title=f"generated {alg.name}", show_header=False)
        for key in ("collective", "ranks", "messages"):
            table.add_row(key, str(summary[key]))
        table.add_row("bytes sent (busiest rank)", f"{summary['bytes_sent_per_rank_max']:,}")
        table.add_row("checked", summary["checked"])
        table.add_row("output", f"{output}.0.et .. {output}.{alg.size - 1}.et")
        console.print(table)
        console.print('system config (ASTRA-sim runs it only with "preferred-dataset-splits": 1):', highlight=False)
        console.print(f"  {line}", highlight=False, markup=False, soft_wrap=True)


def register(root: typer.Typer) -> None:
    root.add_typer(app, name="generate")
