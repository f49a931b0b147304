"""`chakra whatif PREFIX --recipe NAME [options] -o PREFIX`: predict the effect of an optimization."""

from __future__ import annotations

from enum import Enum
from pathlib import Path
from typing import Any, Optional

import typer
from rich.table import Table

from chakra.cli_common import (
    TRACES_HELP,
    CommMode,
    JsonOption,
    MetadataNodeOption,
    QuietOption,
    console,
    handle_errors,
    info,
    print_json,
)


class Recipe(str, Enum):
    """The recipes of chakra.whatif.recipes.RECIPES, named here so `whatif --help` imports no simulator."""

    amp = "amp"
    fused_optimizer = "fused-optimizer"
    scale_compute = "scale-compute"
    network_bandwidth = "network-bandwidth"
    data_parallel = "data-parallel"
    drop_comm = "drop-comm"
    activation_checkpointing = "activation-checkpointing"
    zero = "zero"
    rebalance_routing = "rebalance-routing"
    straggler = "straggler"
    cuda_graphs = "cuda-graphs"


_ROWS = (
    ("step", "step time"),
    ("cpu_only", "CPU only"),
    ("gpu_only", "GPU only"),
    ("cpu_gpu_overlap", "CPU+GPU overlapped"),
    ("compute", "compute (CPU or GPU)"),
    ("comm", "communication"),
    ("exposed_comm", "exposed communication"),
    ("idle", "idle"),
)


def whatif_cmd(
    traces: list[str] = typer.Argument(..., help=TRACES_HELP + "."),
    recipe: Recipe = typer.Option(..., "--recipe", "-r", help="The transformation to apply."),
    output: Optional[Path] = typer.Option(None, "--output", "-o", help="Write the what-if traces to PREFIX.<rank>.et."),
    factor: Optional[float] = typer.Option(
        None, "--factor", "-f", help="scale-compute / network-bandwidth / straggler (slowdown) factor."
    ),
    rank: Optional[int] = typer.Option(None, "--rank", help="straggler: the rank whose compute is slowed."),
    ranks: Optional[int] = typer.Option(
        None, "--ranks", help="data-parallel: number of ranks; zero: ranks to shard over (default: all)."
    ),
    stage: Optional[int] = typer.Option(
        None, "--stage", help="zero: ZeRO stage (1 optimizer state, 2 +gradients, 3 +parameters)."
    ),
    bucket_mb: float = typer.Option(25.0, "--bucket-mb", help="data-parallel: DDP bucket_cap_mb."),
    first_bucket_mb: float = typer.Option(1.0, "--first-bucket-mb", help="data-parallel: DDP first bucket cap."),
    grad_pattern: str = typer.Option(r"AccumulateGrad", "--grad-pattern", help="data-parallel: gradient-ready nodes."),
    sync_pattern: str = typer.Option(r"Optimizer\.step", "--sync-pattern", help="data-parallel: step end."),
    launch_us: Optional[float] = typer.Option(
        None, "--launch-us", help="CPU task per inserted collective (data-parallel) / fused launch (fused-optimizer)."
    ),
    bucket_copies: bool = typer.Option(
        False, "--bucket-copies", help="data-parallel: add DDP's gradient<->bucket copies (cost fitted on aten::copy_)."
    ),
    cores: Optional[int] = typer.Option(
        None, "--cores", help="data-parallel: the ranks share this many CPU cores (one host, CPU backend such as gloo)."
    ),
    serialize_comm: bool = typer.Option(
        True,
        "--serialize-comm/--overlap-comm",
        help="data-parallel with --cores: collectives compete with compute (upper bound) or overlap it (lower bound).",
    ),
    comm_cpu_fraction: Optional[float] = typer.Option(
        None, "--comm-cpu-fraction", help="data-parallel with --cores: share of each collective that is CPU work."
    ),
    pattern: str = typer.Option(r"Optimizer\.step", "--pattern", help="fused-optimizer: optimizer-step regions."),
    kernel_gap_us: Optional[float] = typer.Option(
        None,
        "--kernel-gap-us",
        help="cuda-graphs: the device's gap between two kernels of a replayed graph, µs (default 0.35, an H200's).",
    ),
    scalar_kernel_us: Optional[float] = typer.Option(
        None,
        "--scalar-kernel-us",
        help="cuda-graphs: one one-element kernel, µs (default 1.3): a captured Adam adds 14 per parameter.",
    ),
    cost: str = typer.Option(
        "sum",
        "--cost",
        help="fused-optimizer: sum (of compute ops/kernels) | bytes (CPU: fit c0 + c1*bytes, drop c0) | roofline "
        "(GPU: each tensor read and written once at --bytes-per-s).",
    ),
    bytes_per_s: Optional[float] = typer.Option(
        None, "--bytes-per-s", help="fused-optimizer --cost roofline: device memory bandwidth, bytes/s."
    ),
    on: Optional[str] = typer.Option(None, "--on", help="amp: gpu|cpu kernels; scale-compute, straggler: all|cpu|gpu."),
    compute_speedup: float = typer.Option(3.0, "--compute-speedup", help="amp: compute-bound kernel speedup."),
    memory_speedup: float = typer.Option(2.0, "--memory-speedup", help="amp: memory-bound kernel speedup."),
    ridge: float = typer.Option(10.0, "--ridge", help="amp: FLOP/byte at or above which a kernel is compute-bound."),
    network: Optional[Path] = typer.Option(
        None, "--network", "-n", help="Network config (for data-parallel: N ranks)."
    ),
    system: Optional[Path] = typer.Option(None, "--system", "-s", help="System config."),
    grad_scaler: bool = typer.Option(
        False, "--grad-scaler", help="amp: fp16 with GradScaler (the optimizer step waits for the device's inf check)."
    ),
    measure: bool = typer.Option(
        False,
        "--measure",
        help="amp --on cpu: time each operator the trace runs in fp32 and under bf16 autocast on this host "
        "(torch, the [torch] extra) instead of fixed factors.",
    ),
    threads: Optional[int] = typer.Option(
        None, "--threads", help="amp --measure: torch CPU threads while timing (the training run's; default torch's)."
    ),
    comm: CommMode = typer.Option(CommMode.model, "--comm", help="model | replay (recorded comm durations)."),
    steps: Optional[int] = typer.Option(None, "--steps", help="Steps in the trace (default: ProfilerStep count)."),
    no_simulate: bool = typer.Option(False, "--no-simulate", help="Only write the what-if traces."),
    html: Optional[Path] = typer.Option(
        None, "--html", help="Also write an interactive, self-contained HTML report: baseline vs what-if."
    ),
    metadata_node: bool = MetadataNodeOption,
    json_out: bool = JsonOption,
    quiet: bool = QuietOption,
) -> None:
    """Apply an optimization to the graph (Daydream-style transformation) and predict its effect:
    the simulated step time of the baseline and of the what-if, with a breakdown into CPU-only,
    GPU-only and overlapped compute, and communication (exposed or hidden behind compute).

    Examples:
      [bold]chakra whatif run --recipe amp -o run_amp[/]
      [bold]chakra whatif run --recipe fused-optimizer[/]
      [bold]chakra whatif one_rank --recipe data-parallel --ranks 4 --bucket-mb 25 --network ring4.yml -o dp4[/]
      [bold]chakra whatif run --recipe network-bandwidth --factor 2 --network net.yml[/]
      [bold]chakra whatif moe --recipe rebalance-routing[/]
      [bold]chakra whatif run --recipe straggler --rank 3 --factor 1.2[/]   (one rank 20% slower)
      [bold]chakra whatif run --recipe cuda-graphs[/]   (host launch work gone: device time + one graph launch)
      [bold]chakra whatif cpu_run --recipe amp --on cpu --measure --threads 1[/]   (bf16 autocast, timed here)

    Times describe the run the traces describe: a converted PyTorch recording is the untraced
    run (the profiler's cost removed on conversion), so speedups are real-run speedups; the
    baseline is the step `chakra simulate` prints for the same --comm.
    """
    from chakra.commgroups import groups_beside, metadata_groups, without_metadata, write_comm_groups
    from chakra.io import read_traces, write_rank_traces
    from chakra.whatif.recipes import MEMORY_RECIPES, apply_recipe, predict, write_network_yaml

    recipe, comm = recipe.value, comm.value  # type: ignore[assignment]
    with handle_errors():
        base = read_traces(traces)
        file_groups = groups_beside(traces)
        opts: dict[str, Any] = {
            "factor": factor,
            "rank": rank,
            "ranks": ranks,
            "stage": stage,
            "bucket_mb": bucket_mb,
            "first_bucket_mb": first_bucket_mb,
            "grad_pattern": grad_pattern,
            "sync_pattern": sync_pattern,
            "launch_us": launch_us,
            "bucket_copies": bucket_copies,
            "cores": cores,
            "serialize_comm": serialize_comm,
            "comm_cpu_fraction": comm_cpu_fraction,
            "pattern": pattern,
            "kernel_gap_us": kernel_gap_us,
            "scalar_kernel_us": scalar_kernel_us,
            "cost": cost,
            "bytes_per_s": bytes_per_s,
            "on": on,
            "compute_speedup": compute_speedup,
            "memory_speedup": memory_speedup,
            "ridge": ridge,
            "grad_scaler": grad_scaler,
            "measure": measure,
            "threads": threads,
            "quiet": quiet,
            "network": network if recipe == "network-bandwidth" or comm_cpu_fraction is not None else None,
        }
        result = apply_recipe(recipe, base, **opts)
        for note in result.notes:
            info(f"{recipe}: {note}", quiet)
        report: dict[str, Any] = {"recipe": recipe, "notes": result.notes, "changed": result.changed}
        if recipe in MEMORY_RECIPES:
            report["memory"] = memory_change(base, result.traces)
        if output is not None:
            groups: dict[str, list[int]] = {}
            if len(result.traces) == len(base):  # the recipe kept the job's ranks, so its groups hold
                for t in base:
                    groups.update(metadata_groups(t.nodes))
                groups.update(file_groups)
            out_traces = result.traces
            if not metadata_node:
                out_traces = [without_metadata(t) for t in result.traces]
            paths = write_rank_traces(output, out_traces)
            written = write_comm_groups(output, groups)
            if written is not None:
                report["comm_groups"] = str(written)
            report["outputs"] = [str(p) for p in paths]
            if result.network is not None:
                net_path = Path(f"{output}.network.yml")
                write_network_yaml(net_path, result.network, f"chakra whatif --recipe {recipe}")
                report["network_output"] = str(net_path)
            info(f"wrote {len(paths)} trace(s) to {output}.<rank>.et", quiet)
        if not no_simulate:
            report.update(
                predict(
                    base, result, network=network, system=system, steps=steps, comm_mode=comm, comm_groups=file_groups
                )
            )
            report["comm_mode"] = comm
            if html is not None:
                from chakra.report.figures import whatif_sections
                from chakra.report.html import write_html

                write_html(html, f"chakra whatif --recipe {recipe}: {', '.join(traces)}", whatif_sections(report))
                info(f"wrote {html}", quiet)
        if json_out:
            print_json(report)
            return
        if "memory" in report:
            _print_memory(report)
        if not no_simulate:
            _print_prediction(report)
            if recipe == "straggler" and "ranks" in report:
                _print_ranks(report, rank)


def memory_change(base: list, new: list) -> dict[str, Any]:
    """Peak live tensor bytes per rank, baseline and what-if (chakra.footprint)."""
    from chakra.footprint import rank_footprints

    b, p = rank_footprints(base, top=0), rank_footprints(new, top=0)
    ranks = {
        r: {"baseline_peak_bytes": v["peak_bytes"], "predicted_peak_bytes": p["ranks"][r]["peak_bytes"],
            "device": v["device"]}
        for r, v in b["ranks"].items()
    }  # fmt: skip
    return {"ranks": ranks, "baseline_max_bytes": b["max_peak_bytes"], "predicted_max_bytes": p["max_peak_bytes"]}


def _print_memory(r: dict[str, Any]) -> None:
    from chakra.footprint import fmt_bytes

    t = Table(title=f"what-if {r['recipe']}: peak live tensor bytes per rank", title_justify="left")
    for c in ("rank", "device", "baseline", "predicted", "change"):
        t.add_column(c, justify="left" if c == "device" else "right")
    for rank, v in r["memory"]["ranks"].items():
        bv, pv = v["baseline_peak_bytes"], v["predicted_peak_bytes"]
        change = f"{100 * (pv - bv) / bv:+.1f}%" if bv else "-"
        t.add_row(str(rank), str(v["device"]), fmt_bytes(bv), fmt_bytes(pv), change)
    console.print(t)


def _print_prediction(r: dict[str, Any]) -> None:
    b, p = r["baseline"], r["predicted"]
    t = Table(
        title=f"what-if {r['recipe']}: per step (ms; {r['steps']} step(s) in the trace; slowest rank)",
        title_justify="left",
    )
    t.add_column("")
    t.add_column("baseline", justify="right")
    t.add_column("predicted", justify="right")
    t.add_column("change", justify="right")
    for key, label in _ROWS:
        bv = b["step_ns"] if key == "step" else b["breakdown_per_step_ns"][key]
        pv = p["step_ns"] if key == "step" else p["breakdown_per_step_ns"][key]
        change = f"{100 * (pv - bv) / bv:+.1f}%" if bv else ("-" if not pv else "new")
        t.add_row(label, f"{bv / 1e6:,.3f}", f"{pv / 1e6:,.3f}", change)
    console.print(t)
    sp = r["speedup"]
    console.print(f"predicted speedup: {sp:.3f}x" if sp else "predicted step time is 0")
    tb = r.get("timebase") or {}
    if tb:
        console.print(
            f"times: {tb['label']}; the baseline is the step `chakra simulate --comm {r.get('comm_mode', 'model')}` "
            "prints (median ProfilerStep# span)"
        )


def _print_ranks(r: dict[str, Any], slowed: Optional[int]) -> None:
    """Every rank's step before and after: the slow rank's delay, and what the others wait for it."""
    t = Table(title="every rank's step (ms): the delay reaching the other ranks", title_justify="left")
    for col in ("rank", "baseline", "predicted", "change"):
        t.add_column(col, justify="right")
    for rank, v in r["ranks"].items():
        bv, pv = v["baseline_step_ns"], v["predicted_step_ns"]
        label = f"{rank} (slowed)" if str(slowed) == rank else rank
        t.add_row(label, f"{bv / 1e6:,.3f}", f"{pv / 1e6:,.3f}", f"{(pv - bv) / 1e6:+,.3f}")
    console.print(t)


def register(app: typer.Typer) -> None:
    app.command("whatif")(whatif_cmd)
