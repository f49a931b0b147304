"""`chakra memory PREFIX`: peak and timeline of live tensor bytes per rank, and whether it fits."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Optional

import typer
from rich.table import Table

from chakra.cli_common import TRACES_HELP, JsonOption, QuietOption, console, handle_errors, info, print_json, warn


def memory_cmd(
    traces: list[str] = typer.Argument(..., help=TRACES_HELP + "."),
    capacity: Optional[str] = typer.Option(
        None, "--capacity", "-c", help="Device memory per rank (80GB, 16GiB, ...): flags ranks whose peak exceeds it."
    ),
    strict: bool = typer.Option(
        False, "--strict", help="With --capacity: exit code 1 when a rank does not fit (default: report only, exit 0)."
    ),
    device: Optional[str] = typer.Option(
        None, "--device", help="Count tensors on this device (cpu, cuda:0; default: the accelerator, else cpu)."
    ),
    top: int = typer.Option(5, "--top", min=0, help="Largest allocations live at the peak, per rank."),
    kineto: Optional[list[Path]] = typer.Option(
        None,
        "--kineto",
        "-k",
        help="Kineto traces recorded with profile_memory=True (one per rank): the allocator's own peak beside ours.",
    ),
    json_out: bool = JsonOption,
    quiet: bool = QuietOption,
) -> None:
    """Peak live tensor bytes per rank, from the tensors each operator reads and writes (a PyTorch
    trace converted with its inputs/outputs), the operator at the peak and the largest
    allocations then; `--capacity` says which ranks would not fit.

    Allocations first seen as an input (parameters, optimizer state, the batch) existed before the
    trace and count all along; the others live from their first to their last use. It is a lower
    bound of what the allocator reports (no caching, no workspaces): `--kineto` prints the
    allocator's own figure beside it.

    Examples: [bold]chakra memory out/ddp4[/]   [bold]chakra memory out/ddp4 --capacity 80GB --json[/]
    [bold]chakra memory out/ddp2 -k kineto.0.json.gz -k kineto.1.json.gz[/]
    """
    from chakra.columns import open_traces
    from chakra.converters import expand_inputs
    from chakra.errors import InputError
    from chakra.footprint import allocator_profile, measured_figure, parse_bytes, rank_footprints

    if strict and capacity is None:
        raise typer.BadParameter("needs --capacity", param_hint="--strict")
    try:
        cap = parse_bytes(capacity) if capacity is not None else None
    except InputError as exc:
        raise typer.BadParameter(str(exc).split(": ", 1)[-1], param_hint="--capacity") from None
    with handle_errors():
        loaded = open_traces(traces)
        report = rank_footprints(loaded, device=device, top=top, capacity=cap)
        if kineto:  # named as convert pytorch's -k: files, a folder, a pattern, a PREFIX
            kineto = expand_inputs("kineto", kineto, note=lambda line: info(line, quiet or json_out))[0]
            profiles = [allocator_profile(p) for p in kineto]
            by_rank = _pair(profiles, list(report["ranks"]))
            for rank, prof in by_rank.items():
                fig = measured_figure(report["ranks"][rank], prof)
                if fig is None:
                    warn(f"{prof['path']}: no [memory] events for {report['ranks'][rank]['device']} "
                         "(record with profile_memory=True)")  # fmt: skip
                else:
                    fig["kineto"] = prof["path"]
                    report["ranks"][rank]["allocator"] = fig
        if report.get("note"):
            warn(report["note"])
        if json_out:
            print_json(report)
        else:
            _print(report, top)
        over = report.get("over_capacity") or []
        if over:
            info(f"{len(over)} rank(s) over {capacity}: {', '.join(map(str, over))}", quiet)
            if strict:
                raise typer.Exit(1)


def _pair(profiles: list[dict[str, Any]], ranks: list[int]) -> dict[int, dict[str, Any]]:
    """Kineto profiles by rank: distributedInfo, else the last number in the file name, else order."""
    from chakra.errors import InputError

    out: dict[int, dict[str, Any]] = {}
    for pos, p in enumerate(profiles):
        rank = p["rank"]
        if rank is None:
            nums = re.findall(r"\d+", Path(p["path"]).name)
            rank = int(nums[-1]) if nums and len(profiles) > 1 else ranks[pos] if pos < len(ranks) else pos
        if rank not in ranks:
            raise InputError(f"{p['path']}: rank {rank} has no trace (ranks {ranks})")
        if rank in out:
            raise InputError(f"{p['path']}: a second Kineto trace for rank {rank} ({out[rank]['path']})")
        out[rank] = p
    return out


def _print(report: dict[str, Any], top: int) -> None:
    from chakra.footprint import fmt_bytes

    ranks = report["ranks"]
    cap = report.get("capacity_bytes")
    with_alloc = any("allocator" in r for r in ranks.values())
    t = Table(title="Peak live tensor bytes per rank", title_justify="left")
    cols = ["rank", "device", "peak", "resident", "step peak", "allocations", "at (operator)"]
    if with_alloc:
        cols += ["allocator", "error"]
    if cap is not None:
        cols.append(f"fits {fmt_bytes(cap)}")
    for c in cols:
        t.add_column(c, justify="left" if c in ("device", "at (operator)") else "right")
    for rank, r in ranks.items():
        op = r["peak_op"]["name"] if r["peak_op"] else "-"
        row = [str(rank), str(r["device"]), fmt_bytes(r["peak_bytes"]), fmt_bytes(r["resident_bytes"]),
               fmt_bytes(r["step_peak_bytes"]), f"{r['allocations']:,}", op]  # fmt: skip
        if with_alloc:
            a = r.get("allocator")
            if a is None:
                row += ["-", "-"]
            else:
                err = "-" if a["error"] is None else f"{100 * a['error']:+.1f}%"
                row += [fmt_bytes(a["measured_bytes"]), err]
        if cap is not None:
            row.append("yes" if r["fits"] else "[red]NO[/]")
        t.add_row(*row)
    t.caption = (
        "peak = resident + step peak: resident, the tensors that existed before the trace (parameters, "
        "optimizer state, inputs); step peak, the most the traced operators' own tensors add at once"
    )
    console.print(t)
    if with_alloc:
        console.print(
            "allocator: the profiler's Total Allocated (CPU: what the traced window allocated, against 'step peak'; "
            "CUDA: the whole count, against 'peak')"
        )
    worst = report.get("max_rank")
    if worst is None or not top or not ranks[worst]["top"]:
        return
    r = ranks[worst]
    tb = Table(title=f"rank {worst}: largest allocations live at the peak", title_justify="left")
    for c in ("bytes", "storage", "kind", "first use", "last use"):
        tb.add_column(c, justify="right" if c in ("bytes", "storage") else "left")
    for a in r["top"]:
        tb.add_row(fmt_bytes(a["bytes"]), str(a["storage"]), "resident" if a["resident"] else "made in trace",
                   a["first_op"], a["last_op"])  # fmt: skip
    console.print(tb)


def register(app: typer.Typer) -> None:
    app.command("memory")(memory_cmd)
