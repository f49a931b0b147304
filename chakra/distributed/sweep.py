"""Design-space sweeps: one simulation per grid point as a Dask task, results in Parquet + CSV.

Each task builds its configs with the loaders of `chakra.sim.config`, applies the point's what-if
recipe (`chakra.whatif.recipes`), runs `chakra.sim.simulate` and returns the figures `simulate
--json` reports. The results table is long: per point one `overall` row and one row per rank,
every parameter in its own column. A rerun skips points whose id (a hash of the resolved point)
is already in RESULTS; a failing point is recorded with its error and the sweep goes on.
"""

from __future__ import annotations

import contextlib
import json
import os
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from functools import lru_cache
from pathlib import Path
from typing import Any, Optional

from chakra.errors import ChakraError, ConfigError, InputError
from chakra.files import remove_stale_temps, temp_path, write_error
from chakra.io import Progress

from .cluster import silence_dask
from .grid import Grid, Point, expand

FIGURES = ("finish_ns", "compute_ns", "comm_ns", "exposed_comm_ns", "idle_ns", "mem_ns", "nodes")
#: Table columns before the parameters; figures follow them.
LEAD = ("point_id", "status", "error", "scope", "rank")
# Results are rewritten at most this often while a sweep runs (and at the end, and on Ctrl-C).
FLUSH_S = float(os.environ.get("CHAKRA_SWEEP_FLUSH_S", 10.0))


# ---------------------------------------------------------------------------------------------
# Worker side


@lru_cache(maxsize=2)
def _traces(workload: str, stamp: tuple) -> list:
    """The workload's traces, read once per worker process (what-if recipes edit copies)."""
    from chakra.io import read_traces

    return read_traces([workload])


def _stamp(workload: str) -> tuple:
    from chakra.io import expand_trace_args

    return tuple((str(p), p.stat().st_mtime_ns, p.stat().st_size) for _, p in expand_trace_args([workload]))


def point_inputs(config: dict[str, Any]) -> tuple[Any, dict[str, Any]]:
    """(traces, keyword arguments of `chakra.sim.simulate`) for a resolved point.

    `traces` is the workload PREFIX, or the edited traces of the point's what-if recipe.
    """
    from chakra.sim.config import NetworkConfig, memory_from_dict, system_from_dict

    n = config["network"]
    net = NetworkConfig(list(n["topology"]), [int(x) for x in n["npus_count"]],
                        [float(x) for x in n["bandwidth"]], [float(x) for x in n["latency"]])  # fmt: skip
    net.validate()
    system = system_from_dict(config["system"], "<grid system>")
    memory = memory_from_dict(config["memory"], "<grid memory>") if config["memory"] else None
    workload = config["workload"]
    traces: Any = workload
    wi = config["whatif"]
    if wi is not None:
        from chakra.whatif.recipes import apply_recipe

        opts = {k: v for k, v in wi.items() if k != "recipe"}
        result = apply_recipe(wi["recipe"], _traces(workload, _stamp(workload)), network=net, **opts)
        traces = result.traces
        net = result.network or net
    from chakra.sim import SimOptions

    s = config["simulate"]
    options = SimOptions(comm_groups=config["comm_groups"], congestion=s["congestion"], comm_mode=s["comm_mode"],
                         compat=bool(s["compat"]), policy=s["policy"])  # fmt: skip
    return traces, {"network": net, "system": system, "memory": memory, "options": options}


def simulate_point(config: dict[str, Any]) -> dict[str, Any]:
    """Run one point; `{"result": simulate --json, "wall_s"}` or `{"error": one line}`."""
    from chakra.sim import simulate

    t0 = time.perf_counter()
    try:
        traces, kwargs = point_inputs(config)
        res = simulate(traces, **kwargs)
        return {"result": res.to_json(), "wall_s": res.wall_s, "task_s": time.perf_counter() - t0}
    except ChakraError as exc:
        return {"error": str(exc), "task_s": time.perf_counter() - t0}
    except Exception as exc:  # a model bug on one point must not end the sweep: record it
        return {"error": f"{type(exc).__name__}: {exc}", "task_s": time.perf_counter() - t0}


def critical_path_of(config: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    """(slowest rank, its dependency critical path by operator class) at a point, re-simulated here
    with node times (`chakra.analysis`); for the report, which shows it for a few points only."""
    from chakra import analysis
    from chakra.io import read_traces
    from chakra.sim import simulate

    traces, kwargs = point_inputs(config)
    if not isinstance(traces, list):
        traces = read_traces([traces])
    kwargs["options"] = replace(kwargs["options"], record_nodes=True)
    res = simulate(traces, **kwargs)
    slowest = max(res.ranks, key=lambda r: (res.ranks[r].finish_ns, -r))
    trace = next(t for t in traces if t.rank == slowest)
    report = analysis.analyze_traces([trace], {slowest: (res.node_times or {})[slowest]})
    return slowest, report["ranks"][slowest]["critical_path"]


# ---------------------------------------------------------------------------------------------
# Rows and the results files


def _cell(value: Any) -> Any:
    """Parameter values as table cells: one-entry lists as their value, longer lists joined."""
    if isinstance(value, (list, tuple)):
        if len(value) == 1:
            return _cell(value[0])
        return ",".join(str(_cell(v)) for v in value)
    if isinstance(value, dict):
        return ";".join(f"{k}={_cell(v)}" for k, v in sorted(value.items()))
    return value


def param_columns(point: Point) -> dict[str, Any]:
    """Every parameter of a point, flat: network.*, system.*, memory.*, simulate.*, whatif(.*)."""
    c = point.config
    out: dict[str, Any] = {f"network.{k}": _cell(v) for k, v in c["network"].items()}
    out.update({f"system.{k}": _cell(v) for k, v in sorted(c["system"].items())})
    out.update({f"memory.{k}": _cell(v) for k, v in sorted((c["memory"] or {"memory-type": "none"}).items())})
    out.update({f"simulate.{k}": _cell(v) for k, v in c["simulate"].items()})
    wi = c["whatif"] or {}
    out["whatif"] = wi.get("recipe", "none")
    out.update({f"whatif.{k}": _cell(v) for k, v in sorted(wi.items()) if k != "recipe"})
    out["workload"] = c["workload"]
    return out


def config_json(point: Point) -> str:
    """The resolved point as JSON (in the `config` column): enough to rerun it exactly."""
    return json.dumps(point.config, sort_keys=True, default=str)


def point_rows(point: Point, res: dict[str, Any]) -> list[dict[str, Any]]:
    params = param_columns(point)
    timing = {"task_s": round(float(res.get("task_s", 0.0)), 6), "sim_wall_s": res.get("wall_s")}
    if "error" in res:
        return [{"point_id": point.id, "status": "error", "error": res["error"], "scope": "overall", "rank": None,
                 **params, **timing, "config": config_json(point)}]  # fmt: skip
    sim = res["result"]
    ranks = {int(r): v for r, v in sim["ranks"].items()}
    n = max(len(ranks), 1)
    overall = {f: (max if f == "finish_ns" else sum)(v[f] for v in ranks.values()) for f in FIGURES}
    for f in ("compute_ns", "comm_ns", "exposed_comm_ns", "idle_ns", "mem_ns"):
        overall[f] = overall[f] / n  # mean over ranks; finish is the slowest rank, nodes the sum
    slowest = max(ranks, key=lambda r: (ranks[r]["finish_ns"], -r)) if ranks else None
    head = {"point_id": point.id, "status": "ok", "error": None}
    extra = {
        "events": sim.get("events"),
        "replayed_collectives": sim.get("settings", {}).get("replayed_collectives"),
        "slowest_rank": slowest,
        **timing,
        "config": config_json(point),
    }
    rows = [{**head, "scope": "overall", "rank": None, **params, **overall, **extra}]
    for r in sorted(ranks):
        rows.append({**head, "scope": "rank", "rank": r, **params, **{f: ranks[r][f] for f in FIGURES}})
    return rows


def results_paths(out: Path) -> tuple[Path, Path]:
    """RESULTS -> (RESULTS.parquet, RESULTS.csv); a .parquet or .csv suffix on RESULTS is dropped."""
    out = Path(out)
    if out.suffix in (".parquet", ".csv"):
        out = out.with_suffix("")
    return Path(f"{out}.parquet"), Path(f"{out}.csv")


def _pyarrow() -> Any:
    try:
        import pyarrow
        import pyarrow.csv  # noqa: F401
        import pyarrow.parquet  # noqa: F401
    except ImportError:
        raise ChakraError("sweep results need pyarrow: pip install 'chakra-et[dist]'") from None
    return pyarrow


def read_results(out: Path) -> list[dict[str, Any]]:
    """Rows of an existing RESULTS.parquet ([] when there is none)."""
    pa = _pyarrow()
    parquet, _ = results_paths(out)
    if not parquet.exists():
        return []
    try:
        return pa.parquet.read_table(parquet).to_pylist()
    except (OSError, pa.ArrowException) as exc:
        raise InputError(f"{parquet}: not a readable results table ({exc})") from None


def _column(values: list[Any]) -> Any:
    """A column with one type: numbers stay numbers, mixed kinds become text."""
    pa = _pyarrow()
    kinds = {type(v) for v in values if v is not None}
    if kinds <= {int, float, bool} and not (bool in kinds and kinds - {bool}):
        if kinds == {int, float}:
            values = [None if v is None else float(v) for v in values]
        return pa.array(values)
    return pa.array([None if v is None else str(v) for v in values], type=pa.string())


def table_of(rows: Sequence[dict[str, Any]]) -> Any:
    pa = _pyarrow()
    names: list[str] = list(LEAD)
    for row in rows:
        names.extend(k for k in row if k not in names)
    return pa.table({name: _column([row.get(name) for row in rows]) for name in names})


def write_results(out: Path, rows: Sequence[dict[str, Any]]) -> tuple[Path, Path]:
    """Write RESULTS.parquet and RESULTS.csv atomically (temp file, then rename)."""
    pa = _pyarrow()
    parquet, csv = results_paths(out)
    parquet.parent.mkdir(parents=True, exist_ok=True)
    table = table_of(rows)
    for path, write in ((parquet, pa.parquet.write_table), (csv, pa.csv.write_csv)):
        remove_stale_temps(path)
        tmp = temp_path(path)
        try:
            write(table, str(tmp))
            tmp.replace(path)
        except OSError as exc:
            raise write_error(path, exc) from None
        finally:
            with contextlib.suppress(OSError):
                tmp.unlink(missing_ok=True)
    return parquet, csv


# ---------------------------------------------------------------------------------------------
# Client side


@dataclass
class SweepSummary:
    points: int
    skipped: int
    ran: int
    failed: int
    wall_s: float
    workers: int
    task_s: float  # sum of the tasks' own time (worker side)
    parquet: Optional[Path] = None
    csv: Optional[Path] = None
    errors: Optional[list[tuple[str, str]]] = None

    def to_json(self) -> dict[str, Any]:
        d = dict(self.__dict__)
        d["parquet"], d["csv"] = str(self.parquet), str(self.csv)
        return d


def workload_ranks(workload: str) -> int:
    from chakra.io import expand_trace_args

    return len(expand_trace_args([workload]))


@dataclass
class SweepPlan:
    """What a sweep will do: every point, the rows kept from RESULTS, the points still to run."""

    points: list[Point]
    rows: list[dict[str, Any]]
    todo: list[Point]


def plan_sweep(grid: Grid, workload: str, out: Path, *, retry_errors: bool = False) -> SweepPlan:
    """Expand the grid and subtract the points already in RESULTS (reading only file names and RESULTS)."""
    workload = str(Path(workload).absolute())
    if grid.base["comm_groups"] is None:
        groups = Path(f"{workload}.comm_groups.json")  # what `chakra generate` writes beside its traces
        if groups.is_file():
            grid.base["comm_groups"] = str(groups)
    points = expand(grid, workload, workload_ranks(workload))
    ids = [p.id for p in points]
    if len(set(ids)) != len(ids):
        raise ConfigError(f"{grid.path}: some points are the same simulation (an axis repeats a value)")
    keep_status = {"ok"} if retry_errors else {"ok", "error"}
    rows = [r for r in read_results(out) if r.get("status") in keep_status]
    done_ids = {r["point_id"] for r in rows}
    return SweepPlan(points, rows, [p for p in points if p.id not in done_ids])


def run_sweep(
    grid: Grid,
    workload: str,
    out: Path,
    *,
    client: Any,
    retry_errors: bool = False,
    progress: Optional[Progress] = None,
    plan: Optional[SweepPlan] = None,
) -> SweepSummary:
    """Simulate every point of `grid` not yet in RESULTS; rewrite RESULTS as points finish.

    `client` may be None when `plan` has nothing left to run (no cluster is needed then).
    """
    t0 = time.perf_counter()
    plan = plan or plan_sweep(grid, workload, out, retry_errors=retry_errors)
    points, rows, todo = plan.points, list(plan.rows), plan.todo
    workers = _workers(client) if client is not None else 0
    summary = SweepSummary(len(points), len(points) - len(todo), 0, 0, 0.0, workers, 0.0, errors=[])
    if progress is not None:
        progress(0, len(todo))
    if todo:
        from distributed import as_completed

        futures: dict[Any, Point] = {}
        lost: set[str] = set()  # points whose worker died rather than the simulation failing
        last_flush = time.perf_counter()
        try:
            for p in todo:
                futures[
                    client.submit(simulate_point, p.config, key=f"chakra-sweep-{p.id}-{time.time_ns()}", pure=False)
                ] = p
            for done, fut in enumerate(as_completed(list(futures), loop=client.loop), 1):
                point = futures[fut]
                try:
                    res = fut.result()
                except Exception as exc:  # the worker died: record the point, go on
                    res = {"error": f"{type(exc).__name__}: {exc}"}
                    lost.add(point.id)
                rows.extend(point_rows(point, res))
                summary.ran += 1
                summary.task_s += float(res.get("task_s", 0.0))
                if "error" in res:
                    summary.failed += 1
                    summary.errors.append((point.id, res["error"]))  # type: ignore[union-attr]
                if progress is not None:
                    progress(done, len(todo))
                if time.perf_counter() - last_flush > FLUSH_S:  # a killed sweep keeps what it finished
                    write_results(out, rows)
                    last_flush = time.perf_counter()
        except KeyboardInterrupt:
            # Ctrl-C: keep every finished point for --resume, then let the caller shut the cluster down.
            # Workers get the Ctrl-C too: a point lost with its worker is not a result, --resume
            # runs it again.
            silence_dask()
            _cancel(client, futures)
            _write_sorted(out, [r for r in rows if r["point_id"] not in lost], points)
            raise
    summary.parquet, summary.csv = _write_sorted(out, rows, points)
    summary.wall_s = time.perf_counter() - t0
    return summary


def _write_sorted(out: Path, rows: list[dict[str, Any]], points: Sequence[Point]) -> tuple[Path, Path]:
    order = {p.id: i for i, p in enumerate(points)}
    rows.sort(key=lambda r: (order.get(r["point_id"], len(order)), r["scope"] != "overall", r["rank"] or 0))
    return write_results(out, rows)


def _cancel(client: Any, futures: dict[Any, Any]) -> None:
    """Drop the tasks still queued or running (never raises: the process is on its way out)."""
    with contextlib.suppress(Exception):
        client.cancel(list(futures), force=True)


def _workers(client: Any) -> int:
    return len(client.scheduler_info().get("workers", {}))
