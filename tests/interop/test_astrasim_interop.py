"""Every kind of trace the project writes runs to the end on the real ASTRA-sim, and `chakra
simulate` gives the same per-rank finish times on the same files and configs.

Each case makes its output with the real command (converters on the bundled samples, generate,
synthesize, what-if, the DSL examples), then `chakra export astra-sim` writes the configs (and,
for outputs ASTRA-sim cannot take as they are, the fixed variant). Outputs marked `clean` must
need no fix at all: for them the export is the identity and ASTRA-sim runs our raw files.
"""

from __future__ import annotations

import json
import os
import tarfile
from pathlib import Path
from typing import Callable

import pytest

from chakra.commgroups import groups_beside
from chakra.export.astrasim import plan
from chakra.io import read_traces

from .astrasim import bin_dir, run

BIN, WHY = bin_dir()
pytestmark = pytest.mark.skipif(BIN is None, reason=WHY)

REPO = Path(__file__).resolve().parents[2]
TOLERANCE = 1e-3  # per rank, relative


def _pytorch(name: str, ranks: int) -> Callable:
    def make(s: Path, out: Path, cli: Callable) -> list[str]:
        d = s / "pytorch" / name
        args = [str(d / f"et.{r}.json") for r in range(ranks)]
        for r in range(ranks):
            args += ["-k", str(d / f"kineto.{r}.json")]
        return ["convert", "pytorch", *args, "-o", str(out)]

    return make


def _bigsim(s: Path, out: Path, cli: Callable) -> list[str]:
    logs = out.parent / "bigsim_logs"
    logs.mkdir(exist_ok=True)
    with tarfile.open(s / "bigsim" / "text2log_v6_examples.tgz") as tar:
        tar.extractall(logs, filter="data")
    return ["convert", "bigsim", str(logs / "examples" / "case3"), "-o", str(out)]


def _feeder(s: Path, out: Path, cli: Callable) -> list[str]:
    """The official feeder's test trace: absent dependencies, self-dependencies, cycles."""
    folder = out.parent / "feeder"
    with tarfile.open(s / "et" / "feeder_tests_trace.tar.gz") as tar:
        tar.extractall(folder, filter="data")
    return ["jsonize", str(folder / "tests" / "data" / "chakra.0.et"), "-o", str(out.with_name("raw.0.json"))]


def _synth(s: Path, out: Path, cli: Callable) -> list[str]:
    base = out.parent / "gen_base"
    _ok(cli("generate", "transformer", "--layers", "1", "--hidden", "256", "--heads", "4", "--seq", "64",
            "--batch", "8", "--microbatches", "2", "--dp", "2", "--tp", "2", "-o", str(base), "-q"))  # fmt: skip
    return ["synthesize", str(base), "--ranks", "4", "--seed", "1", "-o", str(out), "-q"]


def _whatif(recipe: str, *extra: str, sample: str = "ddp2", ranks: int = 2) -> Callable:
    def make(s: Path, out: Path, cli: Callable) -> list[str]:
        base = out.parent / "wi_base"
        _ok(cli(*_pytorch(sample, ranks)(s, base, cli), "-q"))
        return ["whatif", str(base), "--recipe", recipe, *extra, "--no-simulate", "-o", str(out), "-q"]

    return make


def _cmd(*args: str) -> Callable:
    return lambda s, out, cli: [a.replace("{S}", str(s)).replace("{R}", str(REPO)) for a in args] + ["-o", str(out)]


SMALL_GPT = ("--layers", "2", "--hidden", "256", "--heads", "4", "--seq", "64", "--batch", "8", "--microbatches", "2")

# name -> (command maker, clean: ASTRA-sim takes the raw output as it is)
CASES: dict[str, tuple[Callable, bool]] = {
    "pytorch-mlp": (_pytorch("mlp", 1), False),  # one rank: ASTRA-sim needs an idle second NPU
    "pytorch-ddp2": (_pytorch("ddp2", 2), False),  # BROADCAST -> ALL_GATHER
    "pytorch-ddp2-as-written": (_pytorch("ddp2", 2), False),  # BROADCAST kept: ASTRA-sim replays it
    "pytorch-collectives2": (_pytorch("collectives2", 2), False),  # REDUCE, GATHER, SCATTER, BARRIER...
    "kineto-nccl": (_cmd("convert", "kineto", "{S}/kineto/hta_nccl_data.json.gz"), False),
    "pytorch-et-only-nccl": (_cmd("convert", "pytorch", "{S}/pytorch_et/chakra_1.0.2-chakra.0.0.4.tgz"), False),
    "nsys": (_cmd("convert", "nsys", "{S}/nsys/testcuda_nsys2026.1_report2.sqlite"), False),
    "nsys-2023": (_cmd("convert", "nsys", "{S}/nsys/reconstream_nsys2023.1_report3.sqlite"), False),
    "flexflow": (
        _cmd(
            "convert",
            "flexflow",
            "{R}/tests/data/flexflow/dp2_taskgraph.dot",
            "--placement",
            "*=0-1",
            "--bandwidth",
            "16",
        ),
        True,
    ),
    "bigsim": (_bigsim, False),
    "text-mlp": (_cmd("convert", "text", "{S}/astrasim/text_workloads/MLP_ModelParallel.txt", "--npus", "4"), True),
    "text-allreduce": (_cmd("convert", "text", "{S}/astrasim/text_workloads/microAllReduce.txt", "--npus", "4"), True),
    "official-json": (_cmd("convert", "auto", "{S}/et/official_small_chakra.0.json"), False),
    "official-feeder-trace": (_feeder, False),
    "gen-transformer-4": (_cmd("generate", "transformer", *SMALL_GPT, "--dp", "2", "--tp", "2"), True),
    "gen-transformer-8": (_cmd("generate", "transformer", *SMALL_GPT, "--dp", "2", "--tp", "2", "--pp", "2"), True),
    "gen-dlrm-4": (_cmd("generate", "dlrm", "--ranks", "4", "--tables", "8", "--batch", "64"), True),
    "gen-dlrm-8": (_cmd("generate", "dlrm", "--ranks", "8", "--tables", "8", "--batch", "64"), True),
    "gen-mlp-4": (_cmd("generate", "mlp", "--dim1", "2", "--dim2", "2", "--hidden", "256", "--batch", "16"), True),
    "gen-mlp-8": (_cmd("generate", "mlp", "--dim1", "2", "--dim2", "4", "--hidden", "256", "--batch", "16"), True),
    "gen-mlp-8-unaware-2d": (
        _cmd("generate", "mlp", "--dim1", "2", "--dim2", "4", "--hidden", "256", "--batch", "16"),
        True,
    ),
    "gen-microbench-4": (_cmd("generate", "microbench", "--ranks", "4", "--max-size", "64KiB"), False),
    "gen-microbench-8": (_cmd("generate", "microbench", "--ranks", "8", "--max-size", "64KiB"), False),
    "synthesize": (_synth, True),
    "whatif-amp": (_whatif("amp"), False),
    "whatif-fused-optimizer": (_whatif("fused-optimizer"), False),
    "whatif-scale-compute": (_whatif("scale-compute", "-f", "2"), False),
    "whatif-network-bandwidth": (_whatif("network-bandwidth", "-f", "2"), False),
    "whatif-data-parallel": (_whatif("data-parallel", "--ranks", "4", sample="mlp", ranks=1), False),
    "whatif-drop-comm": (_whatif("drop-comm"), False),
    "dsl-two-stage-pipeline": (_cmd("generate", "spec", "{R}/examples/two_stage_pipeline.yaml"), False),  # BARRIER
    "dsl-data-parallel": (_cmd("generate", "spec", "{R}/examples/data_parallel.py"), True),
    "dsl-ring-exchange": (_cmd("generate", "spec", "{R}/examples/ring_exchange.py"), True),
}


def _net_2x4(work: Path) -> list[str]:
    """A 2-D network (Ring 2 x Ring 4): only the congestion-unaware binary takes it."""
    net = work / "ring2x4.yml"
    net.write_text("topology: [ Ring, Ring ]\nnpus_count: [ 2, 4 ]\nbandwidth: [ 100, 50 ]\nlatency: [ 500, 500 ]\n")
    return ["--backend", "unaware", "--network", str(net)]


#: outputs whose export changes nothing (ASTRA-sim runs the files as the command wrote them)
UNCHANGED = {"pytorch-ddp2-as-written"}

# name -> extra `chakra export astra-sim` options, given the case's work folder
EXPORT_OPTIONS: dict[str, Callable[[Path], list[str]]] = {
    "gen-mlp-8-unaware-2d": _net_2x4,
    "pytorch-ddp2-as-written": lambda work: ["--broadcast", "replay"],  # no change: the raw files run
}


def _ok(res) -> None:
    assert res.exit_code == 0, res.stderr[-2000:]


@pytest.fixture(scope="module")
def outcomes():
    """name -> {"finished": {rank: cycles}, "simulated": {rank: ns}, "ranks": n, "log": text}, run once.

    With CHAKRA_INTEROP_REPORT=FILE, the comparison is written there as JSON at the end."""
    cache: dict = {}
    yield cache
    target = os.environ.get("CHAKRA_INTEROP_REPORT")
    if target:
        rows = {
            name: {
                "ranks": o["ranks"],
                "astrasim_finished": {str(r): t for r, t in sorted(o["finished"].items())},
                "chakra_simulate": {str(r): t for r, t in sorted(o["simulated"].items())},
            }
            for name, o in cache.items()
        }
        Path(target).write_text(json.dumps(rows, indent=1))


def _outcome(name: str, samples_dir: Path, tmp_path_factory, cli, cache: dict) -> dict:
    if name in cache:
        return cache[name]
    make, clean = CASES[name]
    extra = EXPORT_OPTIONS.get(name, lambda work: [])
    work = tmp_path_factory.mktemp(name.replace("-", "_"))
    raw = work / "raw"
    cmd = make(samples_dir, raw, cli)
    _ok(cli(*cmd, *([] if "-q" in cmd else ["-q"])))
    traces = read_traces([raw])
    findings = plan(traces, groups_beside([raw])).issues
    if clean:
        assert not findings, [f.to_json() for f in findings[:5]]
    out = work / "astra"
    res = cli("export", "astra-sim", str(raw), "-o", str(out), "--missing-deps", "drop", "--json", "-q", *extra(work))
    _ok(res)
    summary = json.loads(res.stdout)
    if name in UNCHANGED:
        assert not summary["changes"] and not summary["padded_rank"], summary["changes"]
    argv = summary["command"].split()
    argv[0] = str(BIN / argv[0])
    finished, log = run(argv, work)
    sim = cli("simulate", *summary["simulate_command"].split()[2:], "--json", "-q")
    _ok(sim)
    simulated = {int(r): v["finish_ns"] for r, v in json.loads(sim.stdout)["ranks"].items()}
    cache[name] = {"finished": finished, "simulated": simulated, "ranks": summary["ranks"], "log": log}
    return cache[name]


@pytest.mark.parametrize("name", list(CASES))
def test_every_rank_finishes_on_astrasim(name, samples_dir, tmp_path_factory, run_cli, outcomes):
    o = _outcome(name, samples_dir, tmp_path_factory, run_cli, outcomes)
    missing = sorted(set(range(o["ranks"])) - set(o["finished"]))
    assert not missing, f"ranks {missing} never finished; ASTRA-sim said:\n{o['log'][-3000:]}"


@pytest.mark.parametrize("name", list(CASES))
def test_simulate_matches_astrasim_per_rank(name, samples_dir, tmp_path_factory, run_cli, outcomes):
    o = _outcome(name, samples_dir, tmp_path_factory, run_cli, outcomes)
    off = {
        r: (o["simulated"].get(r), t)
        for r, t in o["finished"].items()
        if abs(o["simulated"].get(r, -1) - t) > TOLERANCE * max(t, 1)
    }
    assert not off, f"rank: (chakra simulate, ASTRA-sim) ns differing by more than 0.1%: {off}"
