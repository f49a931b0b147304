"""`chakra visualize TRACE... -o OUT`: draw the dependency graph (pdf, svg, png, dot, graphml)."""

from __future__ import annotations

import re
from enum import Enum
from pathlib import Path
from typing import Optional

import typer
from rich.markup import escape

from chakra.cli_common import TRACES_HELP, JsonOption, QuietOption, handle_errors, info, print_json
from chakra.errors import InputError


class Edges(str, Enum):
    all = "all"
    data = "data"
    ctrl = "ctrl"


def visualize_cmd(
    traces: list[str] = typer.Argument(..., help=TRACES_HELP + "."),
    output: Optional[Path] = typer.Option(
        None, "--output", "-o", help="Output file; format from --pdf/... or its suffix (default: INPUT.pdf)."
    ),
    pdf: bool = typer.Option(False, "--pdf", help="Write PDF (needs Graphviz `dot`)."),
    svg: bool = typer.Option(False, "--svg", help="Write SVG (needs Graphviz `dot`; hover shows full names)."),
    png: bool = typer.Option(False, "--png", help="Write PNG (needs Graphviz `dot`)."),
    dot: bool = typer.Option(False, "--dot", help="Write Graphviz DOT text (no Graphviz needed)."),
    graphml: bool = typer.Option(False, "--graphml", help="Write GraphML for networkx/yEd/Gephi (no node limit)."),
    max_nodes: int = typer.Option(
        300, "--max-nodes", min=1, help="Most boxes to draw; beyond it the view is collapsed, or refused."
    ),
    rank: list[int] = typer.Option([], "--rank", "-r", help="Only these ranks (repeat for several)."),
    ids: Optional[str] = typer.Option(None, "--ids", help="Only node ids in A:B (inclusive; A: and :B work)."),
    around: Optional[int] = typer.Option(None, "--around", help="Only this node id, its ancestors and descendants."),
    depth: int = typer.Option(2, "--depth", min=0, help="Hops from --around in each direction."),
    node_type: list[str] = typer.Option(
        [], "--type", "-t", help="Only these kinds: cpu, gpu, comp, coll, send, recv, comm, mem, meta (or NodeType)."
    ),
    name: Optional[str] = typer.Option(None, "--name", help="Only nodes whose name matches this regular expression."),
    step: Optional[str] = typer.Option(
        None,
        "--step",
        help="Only the nodes of these profiler steps (N for ProfilerStep#N, or a regex on the step name), "
        "kernels and collectives included: one step of one rank fits an A4 page.",
    ),
    collapse: str = typer.Option(
        "auto",
        "--collapse",
        help="Group nodes: auto (only when over --max-nodes: the overview where steps and phases can be "
        "read), overview (steps, phases, repeated blocks; threads and streams as lanes), none, op (top-level "
        "operator), annotation, adaptive, prefix (name prefix), name (repeated names).",
    ),
    expand: list[str] = typer.Option(
        [],
        "--expand",
        "-e",
        help="Overview: open the boxes whose title matches this regular expression one level further "
        "(phase -> blocks -> operators -> nodes); repeat to go deeper or open several.",
    ),
    edges: Edges = typer.Option(Edges.all, "--edges", help="Which dependencies to draw: all, data or ctrl."),
    links: bool = typer.Option(True, "--links/--no-links", help="Cross-rank send->recv and collective links."),
    timeout: float = typer.Option(120.0, "--timeout", help="Seconds to let Graphviz run."),
    algorithm: bool = typer.Option(
        False,
        "--algorithm",
        help="PREFIX is a custom collective algorithm: draw it step by step (ranks across, steps down, each "
        "message labelled with its chunks and bytes; reductions bold).",
    ),
    quiet: bool = QuietOption,
    as_json: bool = JsonOption,
) -> None:
    """Draw the dependency graph of Chakra traces.

    Nodes are coloured and shaped by kind (CPU/GPU compute, collective,
    send, receive, memory, metadata) and labelled with name, id, duration
    and comm type/size. Data dependencies are solid arrows, control
    dependencies dashed. Several ranks: one cluster per rank, with dotted
    red links between matching send/recv pairs and collective instances.

    Big traces: above --max-nodes, a trace with a host call tree (PyTorch)
    is drawn as an overview: each profiler step, its forward / backward /
    optimizer phases cut into repeated blocks (layers), one lane per host
    thread, GPU stream and communication, each box with its node count and
    time. Look inside a box with --expand REGEX, or draw nodes with --ids /
    --around. DOT and GraphML need no Graphviz.

    Examples:

      chakra visualize run/trace -o graph.pdf

      chakra visualize out/gpu -o step.png --expand 'forward block 1/'

      chakra visualize out/gpu -o step1.pdf --step 1 --rank 0

      chakra visualize run/trace.0.et --svg -o g.svg --around 42 --depth 3

      chakra visualize run/trace --rank 0 --type comm -o comm.pdf

      chakra visualize run/trace.0.et --graphml -o graph.graphml
    """
    with handle_errors():
        from chakra.inputs import output_stem
        from chakra.io import read_traces
        from chakra.visualizers.graph import FORMATS, default_output, format_for, visualize
        from chakra.visualizers.kinds import parse_types
        from chakra.visualizers.select import Filters, parse_id_range

        chosen = [f for f, on in (("pdf", pdf), ("svg", svg), ("png", png), ("dot", dot), ("graphml", graphml)) if on]
        if len(chosen) > 1:
            raise typer.BadParameter(f"give one output format, not {' and '.join('--' + c for c in chosen)}")
        # -o is used exactly as given: the format comes from the flag, else the suffix, else PDF,
        # and a flag that contradicts a known suffix is refused rather than guessed at.
        suffix = output.suffix.lower().lstrip(".") if output is not None else ""
        suffix_fmt = "dot" if suffix == "gv" else suffix if suffix in FORMATS else None
        if chosen and suffix_fmt is not None and suffix_fmt != chosen[0]:
            raise InputError(f"-o {output}: the suffix says {suffix_fmt} but --{chosen[0]} was asked for")
        fmt = chosen[0] if chosen else (format_for(output, None) if output is not None else "pdf")
        if output is None:
            output = default_output(output_stem(traces[0]), fmt)
        if algorithm:
            from chakra.collective_algorithm import load
            from chakra.visualizers.collective import draw, steps

            if len(traces) != 1:
                raise InputError("--algorithm takes one PREFIX (the algorithm's PREFIX.<rank>.et files)")
            alg = load(traces[0])
            draw(alg, output, fmt, timeout)
            n_steps = len({s for s, *_ in steps(alg)})
            if as_json:
                print_json({"output": str(output), "format": fmt, "ranks": alg.size, "steps": n_steps})
            else:
                info(f"wrote {output} ({fmt}): {alg.size} ranks, {n_steps} steps, {alg.messages()} messages", quiet)
            return
        if expand and collapse not in ("auto", "overview"):
            raise InputError(f"--expand opens boxes of the overview; it does not apply to --collapse {collapse}")
        filters = Filters(depth=depth, around=around)
        try:
            expand_patterns = [re.compile(e) for e in expand]
            if rank:
                filters.ranks = frozenset(rank)
            if ids is not None:
                filters.id_min, filters.id_max = parse_id_range(ids)
            if node_type:
                filters.kinds = parse_types(node_type)
            if name is not None:
                filters.name = re.compile(name)
            if step is not None:
                from chakra.visualizers.overview import step_matches

                filters.step = step_matches(step)
        except (ValueError, re.error) as exc:
            raise InputError(str(exc)) from None
        loaded = read_traces(traces)
        if filters.ranks is not None:
            have = {t.rank for t in loaded}
            missing = sorted(r for r in filters.ranks if r not in have)
            if missing:
                raise InputError(f"--rank {', '.join(map(str, missing))}: not among the ranks read ({sorted(have)})")
        if around is not None and not any(n.id == around for t in loaded for n in t.nodes):
            raise InputError(f"--around {around}: no node with that id in the traces")
        result = visualize(
            loaded,
            output,
            fmt,
            filters=filters,
            collapse=collapse,
            max_nodes=max_nodes,
            edges=edges.value,
            links=links,
            timeout=timeout,
            expand=expand_patterns,
        )
        for note in result.notes:
            info(f"[yellow]note:[/] {escape(note)}", quiet)
        if as_json:
            print_json(result.summary())
        else:
            v = result.view
            info(
                f"wrote {result.output} ({result.format}): {len(v.boxes)} boxes, {len(v.edges)} edges from "
                f"{v.selected_nodes} of {v.total_nodes} nodes in {result.seconds:.1f} s",
                quiet,
            )


def register(app: typer.Typer) -> None:
    app.command("visualize")(visualize_cmd)
