"""Start-up of the `chakra` program: what a small `chakra simulate` imports, and the option
coercion that spares it pydantic (chakra/cli_params.py) giving exactly typer's own results.

No timings here (they would be flaky on a shared machine): bench/startup_bench.py prints them.
The import set is what decides the start-up time, and that is deterministic.
"""

from __future__ import annotations

import os
import subprocess
import sys
from enum import Enum
from pathlib import Path
from typing import Any

import orjson

ALL_REDUCE = ("astrasim", "all_reduce_8npus_1MB", "all_reduce")
RT = ("astrasim", "configs_rt_template")

# Never needed to simulate a small .et trace with ASTRA-sim's config files.
HEAVY = (
    "pydantic",  # typer's coercion (chakra/cli_params.py keeps it out)
    "msgspec",  # JSON traces only (chakra.jsonform)
    "jsonschema",
    "chakra.jsonform",
    "chakra.converters",
    "chakra.visualizers",
    "chakra.whatif",
    "chakra.dsl",
    "chakra.report",
    "chakra.distributed",
    "dask",
    "distributed",
    "pyarrow",
    "plotly",
    "networkx",
    "ijson",
)


# Never needed for a small simulation either: plain configs (chakra/configfile.py) spare it
# PyYAML; the feeder (the simulator indexes with chakra.feeder.table alone) and the progress bar
# that is off are not imported, nor numpy.ma (np.unique imports it), nor protobuf's descriptor_pb2
# (chakra.io writes its runtime messages' descriptors itself). numpy is: the simulator indexes and
# compiles every rank with it.
SMALL_PATH_HEAVY = ("yaml", "chakra.feeder.et_feeder", "rich.progress", "google.protobuf.descriptor_pb2")


def _run_simulate(args: list[str], env: dict[str, str]) -> tuple[str, set[str], int]:
    """`chakra ARGS` in a fresh interpreter: (stdout, modules imported by the end, threads)."""
    script = (
        "import sys\n"
        f"sys.argv = {args!r}\n"
        "from chakra.cli import main\n"
        "try:\n    main()\nexcept SystemExit as exc:\n    assert not exc.code, exc.code\n"
        "import os\n"
        "print('THREADS', len(os.listdir('/proc/self/task')) if os.path.isdir('/proc/self/task') else 1)\n"
        "print('MODULES', ' '.join(sorted(sys.modules)))\n"
    )
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, env=env)
    assert proc.returncode == 0, proc.stderr
    out, _, modules_line = proc.stdout.rpartition("MODULES ")
    out, _, threads = out.rpartition("THREADS ")
    return out, set(modules_line.split()), int(threads)


def _heavy(modules: set[str], heavy: tuple[str, ...]) -> list[str]:
    return sorted(m for m in modules if m.split(".")[0] in heavy or m.startswith(heavy))


def test_small_simulate_imports_only_what_it_uses(samples_dir: Path) -> None:
    trace = samples_dir.joinpath(*ALL_REDUCE)
    net = samples_dir.joinpath(*RT, "network_cfg.yml")  # ASTRA-sim's YAML, in the plain subset
    system = samples_dir.joinpath(*RT, "system_cfg.json")
    args = ["chakra", "simulate", str(trace), "--network", str(net), "--system", str(system), "--json", "-q"]
    env = {k: v for k, v in os.environ.items() if k != "OPENBLAS_NUM_THREADS"}
    out, modules, threads = _run_simulate(args, env)
    assert threads == 1  # numpy was imported, and its BLAS started no thread per core (chakra/cli.py)
    result = orjson.loads(out)
    assert result["finish_ns"] == 117_780 and len(result["ranks"]) == 8  # ASTRA-sim's rt_template figure
    assert "chakra.commands.simulate" in modules and "chakra.sim.api" in modules  # the test ran the command
    assert "chakra.export.astrasim" in modules  # and the ASTRA-sim checks (they read the traces too)
    assert _heavy(modules, HEAVY) == []
    assert _heavy(modules, SMALL_PATH_HEAVY) == []
    assert "numpy.ma" not in modules
    assert "numpy" in modules and "chakra.feeder.table" in modules  # what it does use
    assert "rich.table" not in modules and "rich.console" not in modules  # --json -q: no table, no console
    # Only the command that runs is imported, never its siblings.
    assert sorted(m for m in modules if m.startswith("chakra.commands.")) == ["chakra.commands.simulate"]


def test_small_simulate_with_a_json_network_and_a_table(samples_dir: Path, tmp_path: Path) -> None:
    """A JSON network config (JSON is YAML: ASTRA-sim reads it too) and the per-rank table people
    read: still no PyYAML, no feeder and no progress bar."""
    net = tmp_path / "network.json"
    net.write_text('{"topology": ["Ring"], "npus_count": [8], "bandwidth": [50.0], "latency": [500.0]}')
    trace = samples_dir.joinpath(*ALL_REDUCE)
    system = samples_dir.joinpath(*RT, "system_cfg.json")
    args = ["chakra", "simulate", str(trace), "--network", str(net), "--system", str(system)]
    out, modules, _ = _run_simulate(args, {**os.environ, "COLUMNS": "120"})
    assert "117,780" in out and "rank" in out  # the table, ASTRA-sim's figure on every rank
    assert "rich.table" in modules
    assert _heavy(modules, SMALL_PATH_HEAVY) == [] and "numpy.ma" not in modules


def test_a_blas_thread_count_the_user_set_is_kept() -> None:
    script = (
        "import os, sys\n"
        "sys.argv = ['chakra', '--version']\n"
        "import chakra.cli\n"
        "print(os.environ['OPENBLAS_NUM_THREADS'])\n"
    )
    env = {**os.environ, "OPENBLAS_NUM_THREADS": "2"}
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60, env=env)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["2"]


# --- chakra/cli_params.py: the same values as typer's pydantic coercion -------------------------

_STRINGS = ["abc", "", "id", "aware", "AWARE", "drop", "3", "-2", "0", "007", "1_000", " 4", "1.5", "-0.25"]
_STRINGS += ["2.50", "1e3", "nan", "x.yml", "-", "/tmp", "true", "no"]


def _all_commands() -> list[Any]:
    import typer.main

    from chakra.cli import COMMANDS, app

    group = typer.main.get_group(app)
    todo = [group] + [group.get_command(None, name) for name in COMMANDS]  # type: ignore[arg-type]
    seen: list[Any] = []
    while todo:
        cmd = todo.pop()
        if cmd is None or any(cmd is c for c in seen):
            continue
        seen.append(cmd)
        todo.extend(getattr(cmd, "commands", {}).values())
    return seen


def _outcome(runtime_param: Any, value: Any, param: Any, ctx: Any) -> tuple:
    try:
        value = runtime_param.coerce(value, param=param, ctx=ctx)
    except Exception as exc:  # the message the user would read
        return ("error", type(exc).__name__, str(exc))
    return ("ok", type(value), repr(value))  # repr: nan == nan


def _samples(param: Any, annotation: Any) -> list[Any]:
    values: list[Any] = [param.default, *_STRINGS]
    if isinstance(annotation, type) and issubclass(annotation, Enum):
        values += list(annotation)
    values += [3, 2.5, Path("a.json"), True]
    if param.multiple or param.nargs == -1:
        return [param.default, (), ("a", "b"), ("3", "x.yml"), tuple(_STRINGS)]
    return values


def test_fast_coercion_gives_typer_s_own_result_for_every_option_of_every_command() -> None:
    import typer.core

    import chakra.cli  # noqa: F401  (installs the fast coercion)
    from chakra.cli_params import FastParam

    typer_build = getattr(typer.core.build_runtime_param, "typer_build", None)
    assert typer_build is not None, "chakra.cli did not install the fast coercion"
    from typer._click import Context

    compared = fast_hits = 0
    for cmd in _all_commands():
        ctx = Context(cmd)
        for param in cmd.params:
            desc = getattr(param, "type_descriptor", None)
            if desc is None:
                continue
            for value in _samples(param, desc.annotation):
                fast = FastParam(desc, typer_build)
                real = typer_build(desc)
                got = _outcome(fast, value, param, ctx)
                want = _outcome(real, value, param, ctx)
                assert got == want, (cmd.name, param.name, desc.annotation, value)
                compared += 1
                fast_hits += fast._real is None  # answered without typer's adapter
    # Every command's options were compared, and most plain values never needed pydantic.
    assert compared > 3000 and fast_hits > compared // 3, (compared, fast_hits)


def test_documented_library_loop_runs_and_gives_astra_sim_s_figure() -> None:
    # docs/simulator.md's example of the fast path for many small simulations, run as written.
    import re

    repo = Path(__file__).resolve().parents[2]
    text = (repo / "docs" / "simulator.md").read_text()
    section = text[text.index("**Many small simulations") :]
    body = re.search(r"```python\n(.*?)```", section, re.S).group(1)
    proc = subprocess.run([sys.executable, "-c", body], cwd=repo, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    finishes = [int(m.replace(",", "")) for m in re.findall(r"^bandwidth x\S+: ([\d,]+) ns$", proc.stdout, re.M)]
    assert len(finishes) == 4 and finishes[1] == 117_780  # ASTRA-sim's rt_template case at its own bandwidth
    assert finishes == sorted(finishes, reverse=True)  # more bandwidth, earlier finish


# --- warnings to a pipe: the bytes rich would write, without importing rich's console -----------

_MESSAGES = [
    "ASTRA-sim would fail here (subgroup-double-free: ranks 0-19, 20 such): ALL_REDUCE on process subgroups 1, 129",
    "[bold]not markup[/] and a [link] in brackets, a :fire: that stays text",
    "two\nlines",
    "trailing space ",
    "x" * 600,  # wraps at the 1,000-column width: left to rich
    "tab\there",  # rich expands it: left to rich
    "wide 漢字 characters",
    "",
]


def _stderr_of(messages: list[str], env: dict[str, str], rich_first: bool) -> tuple[bytes, bool]:
    """stderr bytes of `warn(m)` and `info(m)` for every message in a fresh interpreter with stderr a
    pipe, and whether rich's console was imported; `rich_first` makes the consoles beforehand."""
    script = (
        "import sys\n"
        "from chakra import cli_common\n"
        f"if {rich_first!r}:\n    cli_common._consoles()\n"
        f"for m in {messages!r}:\n    cli_common.warn(m)\n    cli_common.info(m)\n"
        "print('rich.console' in sys.modules)\n"
    )
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, timeout=60, env=env)
    assert proc.returncode == 0, proc.stderr
    return proc.stderr, proc.stdout.strip() == b"True"


def test_warnings_to_a_pipe_are_rich_s_bytes_without_rich() -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "FORCE_COLOR", "TTY_COMPATIBLE")}
    plain, imported = _stderr_of(_MESSAGES[:1], env, rich_first=False)
    assert not imported and plain.startswith(b"warning: ASTRA-sim would fail here")
    plain, _ = _stderr_of(_MESSAGES, env, rich_first=False)
    by_rich, imported = _stderr_of(_MESSAGES, env, rich_first=True)
    assert imported and plain == by_rich
    for columns in ("40", "200"):  # a width the user set: lines that would wrap go through rich
        plain, _ = _stderr_of(_MESSAGES, {**env, "COLUMNS": columns}, rich_first=False)
        by_rich, _ = _stderr_of(_MESSAGES, {**env, "COLUMNS": columns}, rich_first=True)
        assert plain == by_rich, columns
    coloured, imported = _stderr_of(_MESSAGES[:1], {**env, "FORCE_COLOR": "1"}, rich_first=False)
    assert imported and b"\x1b[" in coloured  # colour forced: rich writes it


def test_quiet_commands_never_make_a_rich_console(samples_dir: Path, tmp_path: Path) -> None:
    """Command modules import `console` at their top; with -q and no table it stays a stand-in, so
    rich's console is never imported."""
    mlp = samples_dir / "pytorch" / "mlp"
    out = tmp_path / "mlp.et"
    args = ["chakra", "convert", "pytorch", str(mlp / "et.0.json"), "-k", str(mlp / "kineto.0.json"), "-o", str(out)]
    _, modules, _ = _run_simulate([*args, "-q"], dict(os.environ))
    assert out.with_name("mlp.et.0.et").exists()  # rank 0 of the prefix
    assert "chakra.converters.pytorch.cli" in modules  # the command ran
    assert "rich.console" not in modules and "hashlib" not in modules
