"""Dependency-graph drawings of Chakra traces: PDF/SVG/PNG (through Graphviz `dot`), DOT, GraphML.

The official visualizer puts every node in one Graphviz graph, shows only names and needs the
`dot` binary even to write `.dot`; on a 675-node PyTorch trace it ran for minutes. Here a drawing
is built from a view (see `select`): filters choose the nodes, and when more than `max_nodes`
remain the view is collapsed into boxes of consecutive nodes, so the default drawing of a real
trace stays readable and renders in seconds. DOT and GraphML are written in pure Python.

>>> from chakra.io import read_traces
>>> visualize(read_traces(["run/trace"]), "graph.pdf")            # doctest: +SKIP
"""

from __future__ import annotations

import io
import os
import re
import shlex
import shutil
import subprocess
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional, Union

from chakra.errors import ChakraError, InputError
from chakra.io import atomic_output
from chakra.trace import Trace
from chakra.visualizers.graph_formats import COLLAPSE_TEXT, write_dot, write_graphml
from chakra.visualizers.grouping import has_call_tree, tree_of
from chakra.visualizers.select import (
    COLLAPSE_MODES,
    EDGE_MODES,
    Filters,
    View,
    build_view,
    count_boxes,
    rank_of,
    selections,
)

FORMATS = ("pdf", "svg", "png", "dot", "graphml")
RENDERED = frozenset({"pdf", "svg", "png"})
#: Above this many boxes a drawing stops being readable and `dot` slows to tens of seconds.
DEFAULT_MAX_NODES = 300
#: What an automatically collapsed view aims at (boxes over all ranks).
READABLE_BOXES = 80
#: What the overview of a big trace aims at (boxes over all ranks): a page read in a minute.
OVERVIEW_BOXES = 160
#: ... and per rank at least (a many-rank overview needs several boxes a rank to say anything).
OVERVIEW_MIN_PER_RANK = 14
DEFAULT_TIMEOUT_S = 120.0
INSTALL_HINT = "install Graphviz (Debian/Ubuntu: apt-get install graphviz; macOS: brew install graphviz)"
ZOOM_HINT = "narrow it with --rank, --ids A:B, --around ID --depth K, --type or --name REGEX, or raise --max-nodes"


class GraphvizMissing(ChakraError):
    """PDF/SVG/PNG need the Graphviz `dot` program and it is not on PATH."""


class TooManyNodes(ChakraError):
    """The selection is too large to draw readably even when collapsed."""


@dataclass
class VisualizeResult:
    output: Path
    format: str
    view: View
    seconds: float
    notes: list[str] = field(default_factory=list)

    def summary(self) -> dict:
        v = self.view
        return {
            "output": str(self.output),
            "format": self.format,
            "ranks": v.ranks,
            "nodes_total": v.total_nodes,
            "nodes_selected": v.selected_nodes,
            "boxes": len(v.boxes),
            "edges": len(v.edges),
            "cross_rank_collectives": len(v.hubs),
            "collapsed_by": v.collapsed_by,
            "hidden_edges": v.hidden_edges,
            "seconds": round(self.seconds, 3),
            "notes": self.notes,
        }


def format_for(output: Union[str, Path], fmt: Optional[str]) -> str:
    """The output format: the one asked for, else the file suffix, else PDF."""
    if fmt is not None:
        if fmt not in FORMATS:
            raise InputError(f"unknown output format {fmt!r}; use one of {', '.join(FORMATS)}")
        return fmt
    suffix = Path(output).suffix.lower().lstrip(".")
    if suffix == "gv":
        return "dot"
    return suffix if suffix in FORMATS else "pdf"


def choose_view(
    traces: Sequence[Trace],
    filters: Filters,
    *,
    collapse: str = "auto",
    max_nodes: int = DEFAULT_MAX_NODES,
    edges: str = "all",
    links: bool = True,
    limit: bool = True,
    expand: Sequence[re.Pattern[str]] = (),
) -> tuple[View, list[str]]:
    """The view to draw and notes for the user; with `auto`, collapse only as much as needed to fit.

    `limit=False` (GraphML, meant for analysis tools) never collapses automatically and never refuses.
    A trace too big to draw node by node, with a call tree to read steps and phases from, gets the
    overview (see `overview`); `expand` opens the overview's boxes whose title matches.
    """
    if collapse not in COLLAPSE_MODES:
        raise InputError(f"unknown --collapse {collapse!r}; use one of {', '.join(COLLAPSE_MODES)}")
    if edges not in EDGE_MODES:
        raise InputError(f"unknown --edges {edges!r}; use one of {', '.join(EDGE_MODES)}")
    kept = selections(traces, filters)
    cache: dict = {}
    if filters.step is not None:
        kept = _in_steps(traces, kept, filters.step, cache)
    selected = sum(len(k) for k in kept.values())
    if selected == 0:
        what = filters.describe() or "no filters"
        total = sum(len(t.nodes) for t in traces)
        raise InputError(f"no node matches the filters ({what}); the traces hold {total} nodes")

    def build(mode: str, target: int = 0) -> View:
        return build_view(
            traces, filters, mode, edges, links, target=target, kept_by_rank=kept, cache=cache, expand=expand
        )

    tree = any(has_call_tree(t, cache) for t in traces)
    overview_target = max(OVERVIEW_MIN_PER_RANK, min(max_nodes, OVERVIEW_BOXES) // max(1, len(kept)))
    if collapse == "overview" or (collapse == "auto" and expand):
        view = build("overview", overview_target)
        return view, [_overview_note(view, selected, max_nodes, expand)]
    if collapse != "auto":
        if limit and count_boxes(traces, kept, collapse, 0, cache) > max_nodes:
            n = count_boxes(traces, kept, collapse, 0, cache)
            raise TooManyNodes(
                f"{selected} nodes give {n} boxes with --collapse {collapse}, more than --max-nodes {max_nodes}; "
                f"{ZOOM_HINT}{_first_ids_hint(traces, kept, max_nodes)} (or write --graphml, which has no limit)"
            )
        return build(collapse), []
    if not limit or selected <= max_nodes:
        return build("none"), []
    if tree and count_boxes(traces, kept, "overview", overview_target, cache) <= max_nodes:
        view = build("overview", overview_target)
        return view, [_overview_note(view, selected, max_nodes, expand)]
    target = max(8, min(max_nodes, READABLE_BOXES) // max(1, len(kept)))
    tried = []
    for mode in ("adaptive", "annotation", "prefix") if tree else ("name", "prefix"):
        n = count_boxes(traces, kept, mode, target, cache)
        tried.append(f"{COLLAPSE_TEXT[mode]}: {n} boxes")
        if n <= max_nodes:
            note = (
                f"{selected} nodes exceed --max-nodes {max_nodes}: drew them {COLLAPSE_TEXT[mode]} "
                f"({n} boxes). To see single nodes, {ZOOM_HINT}."
            )
            return build(mode, target), [note]
    # Even grouped it is too big (e.g. a trace without times or call tree to group by): draw the
    # beginning of it rather than nothing, and say how to move the window.
    window, shown = _first_window(traces, kept, max_nodes)
    view = build_view(traces, filters, "none", edges, links, target=0, kept_by_rank=window, cache={})
    note = (
        f"{selected} nodes exceed --max-nodes {max_nodes} even when collapsed ({'; '.join(tried)}): drew the "
        f"first {shown}. {ZOOM_HINT}{_first_ids_hint(traces, kept, max_nodes)} (or write --graphml, which has no limit)"
    )
    return view, [note]


def _in_steps(traces: Sequence[Trace], kept: dict[int, list[int]], pattern: re.Pattern[str], cache: dict) -> dict:
    from chakra.visualizers.overview import in_steps

    out = {}
    for pos, trace in enumerate(traces):
        rank = rank_of(trace, pos)
        if rank in kept:
            tree, _, memo = tree_of(trace, cache)
            out[rank] = in_steps(trace, tree, memo, kept[rank], pattern)
    return out


def _overview_note(view: View, selected: int, max_nodes: int, expand: Sequence[re.Pattern[str]]) -> str:
    """What the overview shows and how to look inside a box."""
    from chakra.visualizers.graph_formats import OVERVIEW_TEXT

    biggest = max(view.boxes, key=lambda b: b.count)
    why = f"{selected} nodes exceed --max-nodes {max_nodes}: " if selected > max_nodes and not expand else ""
    return (
        f"{why}drew an overview, {OVERVIEW_TEXT.get(view.level, view.level)} ({len(view.boxes)} boxes). "
        f"Look inside a box with --expand REGEX on its title (e.g. --expand {shlex.quote(biggest.name)}), "
        f"or draw its nodes with --ids {biggest.first_id}:{biggest.last_id} --collapse op, or --around ID"
    )


#: ranks drawn side by side at most when only a window of a big multi-rank trace fits
_WINDOW_MIN_PER_RANK = 30


def _first_window(
    traces: Sequence[Trace], kept: dict[int, list[int]], max_nodes: int
) -> tuple[dict[int, list[int]], str]:
    """The lowest-id selected nodes of the first ranks, at most `max_nodes` in all, and a description."""
    ranks = [rank_of(trace, pos) for pos, trace in enumerate(traces) if kept.get(rank_of(trace, pos))]
    ranks = ranks[: max(1, max_nodes // _WINDOW_MIN_PER_RANK)]
    per_rank = max(1, max_nodes // len(ranks))
    by_rank = {rank_of(trace, pos): trace for pos, trace in enumerate(traces)}
    window = {}
    spans = []
    for rank in ranks:
        trace = by_rank[rank]
        idx = sorted(kept[rank], key=lambda i: trace.nodes[i].id)[:per_rank]
        window[rank] = sorted(idx)
        spans.append(f"rank {rank} ids {trace.nodes[idx[0]].id}..{trace.nodes[idx[-1]].id}")
    shown = f"{sum(len(v) for v in window.values())} nodes ({'; '.join(spans[:3])}{' ...' if len(spans) > 3 else ''})"
    return window, shown


def _first_ids_hint(traces: Sequence[Trace], kept: dict[int, list[int]], max_nodes: int) -> str:
    """A concrete starting point: the id range of the lowest-id nodes of the first rank that fit."""
    for pos, trace in enumerate(traces):
        idx = kept.get(rank_of(trace, pos))
        if idx:
            ids = sorted(trace.nodes[i].id for i in idx)[:max_nodes]
            rank = rank_of(trace, pos)
            only = f" --rank {rank}" if len(kept) > 1 else ""
            return f"; e.g.{only} --ids {ids[0]}:{ids[-1]} shows {len(ids)} nodes"
    return ""


def dot_source(view: View, filters_text: str = "") -> str:
    buf = io.StringIO()
    write_dot(view, buf, filters_text)
    return buf.getvalue()


def find_dot() -> str:
    exe = shutil.which("dot")
    if exe is None:
        raise GraphvizMissing(
            f"the Graphviz `dot` program is needed for PDF/SVG/PNG but is not on PATH; {INSTALL_HINT}, "
            "or write --dot / --graphml, which need no Graphviz"
        )
    return exe


def render(dot_text: str, fmt: str, output: Union[str, Path], timeout: float = DEFAULT_TIMEOUT_S) -> Path:
    """Run `dot -T<fmt>` on the DOT text; the output file appears only when dot succeeds."""
    exe = find_dot()
    output = Path(output)
    try:
        with atomic_output(output, "wb") as f:
            # dot writes to a pipe and this process writes the file: a full disk then fails here,
            # with one line naming the output and the disk, not in dot ("gvwrite_no_z problem").
            proc = subprocess.run(
                [exe, f"-T{fmt}"],
                input=dot_text.encode("utf-8"),
                capture_output=True,
                timeout=timeout,
                check=False,
            )
            if proc.returncode != 0:
                msg = proc.stderr.decode("utf-8", "replace").strip().splitlines()
                raise ChakraError(f"graphviz dot failed (exit {proc.returncode}): {msg[0] if msg else 'no message'}")
            f.write(proc.stdout)
    except subprocess.TimeoutExpired:
        raise ChakraError(
            f"graphviz dot took longer than {timeout:.0f} s; draw fewer boxes (lower --max-nodes or use --collapse)"
        ) from None
    except OSError as exc:
        raise ChakraError(f"cannot run graphviz dot ({exe}): {exc}") from None
    return output


def visualize(
    traces: Sequence[Trace],
    output: Union[str, Path],
    fmt: Optional[str] = None,
    *,
    filters: Optional[Filters] = None,
    collapse: str = "auto",
    max_nodes: int = DEFAULT_MAX_NODES,
    edges: str = "all",
    links: bool = True,
    timeout: float = DEFAULT_TIMEOUT_S,
    expand: Sequence[re.Pattern[str]] = (),
) -> VisualizeResult:
    """Draw `traces` into `output` (pdf, svg, png, dot or graphml); see the module docstring."""
    t0 = time.perf_counter()
    fmt = format_for(output, fmt)
    if not traces:
        raise InputError("no traces to draw")
    if fmt in RENDERED:
        find_dot()  # fail before any work when Graphviz is missing
    filters = filters or Filters()
    view, notes = choose_view(
        traces,
        filters,
        collapse=collapse,
        max_nodes=max_nodes,
        edges=edges,
        links=links,
        limit=fmt != "graphml",
        expand=expand,
    )
    output = Path(output)
    if fmt == "graphml":
        with atomic_output(output, "wb") as raw:
            text = io.TextIOWrapper(raw, encoding="utf-8", newline="\n")
            write_graphml(view, text)
            text.flush()
            text.detach()
    else:
        source = dot_source(view, filters.describe())
        if fmt == "dot":
            with atomic_output(output, "wb") as f:
                f.write(source.encode("utf-8"))
        else:
            render(source, fmt, output, timeout)
    return VisualizeResult(output=output, format=fmt, view=view, seconds=time.perf_counter() - t0, notes=notes)


def default_output(first_input: Union[str, os.PathLike], fmt: str) -> Path:
    """`run/trace.0.et` -> `run/trace.0.pdf`; a PREFIX -> `PREFIX.pdf`."""
    p = Path(first_input)
    name = p.name
    for suffix in (".et.gz", ".json.gz", ".et", ".json"):
        if name.endswith(suffix):
            name = name[: -len(suffix)]
            break
    return p.with_name(f"{name}.{fmt}")
