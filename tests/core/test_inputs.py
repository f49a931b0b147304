"""Every command names its inputs the same way (chakra/inputs.py, table in docs/inputs.md): a file,
a PREFIX, a folder, a quoted pattern and `-` (standard input) give the same answer, on the plain
path and on Dask (`--workers`) alike, and the ET/Kineto pairing of a folder takes the common
namings (ours, PARAM's, HTA's).

The traces are real recordings: the bundled 2-rank DDP run (tests/data/samples/pytorch/ddp2) and
the one-GPU run of tests/data/gpu/fp32. The PARAM-named folder holds those same real files under
the names PARAM's DLRM traces use (`dlrm_eg_<rank>.json` for the ETs and the profiler's
`worker<rank>_step_<step>.<timestamp>.pt.trace.json` for Kineto, as in mlcommons/chakra's
linking script): no tool here records under those names, so the files are copied to them.
"""

from __future__ import annotations

import importlib.util
import json
import shutil
from pathlib import Path

import pytest

from chakra.errors import InputError
from chakra.inputs import expand_traces, output_stem

REPO = Path(__file__).resolve().parent.parent.parent
GPU = REPO / "tests" / "data" / "gpu"


def _ok(res):
    assert res.exit_code == 0, res.stderr
    return res


@pytest.fixture(scope="module")
def ddp2_run(tmp_path_factory, samples_dir) -> Path:
    """The real ddp2 recording converted from its files named one by one: out/ddp2.<rank>.et."""
    from typer.testing import CliRunner

    from chakra.cli import app

    d = samples_dir / "pytorch" / "ddp2"
    out = tmp_path_factory.mktemp("run") / "ddp2"
    args = ["convert", "pytorch", str(d / "et.0.json"), str(d / "et.1.json"), "-k", str(d / "kineto.0.json")]
    args += ["-k", str(d / "kineto.1.json"), "-o", str(out), "-q"]
    res = CliRunner().invoke(app, args, catch_exceptions=False)
    assert res.exit_code == 0, res.output
    return out


def _rank_bytes(prefix: Path) -> list[bytes]:
    return [prefix.with_name(f"{prefix.name}.{r}.et").read_bytes() for r in (0, 1)]


def _converts_as_ddp2_on_both_paths(run_cli, folder: Path, tmp_path: Path, ddp2_run: Path) -> None:
    """`convert pytorch FOLDER` writes ddp2's bytes, plainly and on Dask (where Dask is installed)."""
    _ok(run_cli("convert", "pytorch", str(folder), "-o", str(tmp_path / "plain"), "-q"))
    assert _rank_bytes(tmp_path / "plain") == _rank_bytes(ddp2_run)
    pytest.importorskip("dask.distributed")
    _ok(run_cli("convert", "pytorch", str(folder), "--workers", "2", "-o", str(tmp_path / "dask"), "-q"))
    assert _rank_bytes(tmp_path / "dask") == _rank_bytes(ddp2_run)


# ---------------------------------------------------------------------------------------------
# Chakra traces: every reading command


SPELLINGS = ("prefix", "folder", "pattern", "files")


def _spell(run: Path, how: str) -> list[str]:
    return {
        "prefix": [str(run)],
        "folder": [str(run.parent)],
        "pattern": [f"{run.parent}/ddp2.*.et"],  # quoted: chakra expands it, not the shell
        "files": [str(run.parent / "ddp2.0.et"), str(run.parent / "ddp2.1.et")],
    }[how]


@pytest.mark.parametrize(
    "command",
    [
        ["stats", "--json"],
        ["validate", "--json"],
        ["memory", "--json"],
        ["analyze", "--json"],
        ["simulate", "--json", "-q"],
    ],  # fmt: skip
    ids=lambda c: c[0],
)
def test_a_prefix_a_folder_a_pattern_and_the_files_give_one_answer(command, ddp2_run, run_cli):
    answers = {}
    for how in SPELLINGS:
        data = json.loads(_ok(run_cli(command[0], *_spell(ddp2_run, how), *command[1:])).stdout)
        data.pop("wall_s", None)  # the simulator's own run time
        answers[how] = data
    assert answers["prefix"] == answers["folder"] == answers["pattern"] == answers["files"]
    if command[0] == "stats":
        assert answers["folder"]["summary"]["ranks"] == 2 and answers["folder"]["summary"]["nodes"] == 2014


def test_standard_input_is_one_trace_like_its_file(ddp2_run, run_cli):
    rank0 = ddp2_run.parent / "ddp2.0.et"
    by_name = json.loads(_ok(run_cli("stats", str(rank0), "--json")).stdout)
    piped = json.loads(_ok(run_cli("stats", "-", "--json", input=rank0.read_bytes())).stdout)
    assert piped == by_name and by_name["ranks"]["0"]["nodes"] == 1007
    empty = run_cli("stats", "-", input=b"")
    assert empty.exit_code == 1 and "-: standard input is empty" in empty.stderr


@pytest.mark.parametrize(
    "command",
    [
        ["export", "astra-sim", "{in}", "-o", "{out}/exp"],
        ["synthesize", "{in}", "--ranks", "2", "-o", "{out}/syn"],
        ["interpolate", "{in}", "--scale", "0.5", "-o", "{out}/int"],
        ["jsonize", "{in}", "-o", "{out}/js"],
        ["whatif", "{in}", "--recipe", "amp", "--no-simulate", "-o", "{out}/amp"],
    ],  # fmt: skip
    ids=lambda c: c[0],
)
def test_writers_take_a_folder_and_a_pattern(command, ddp2_run, run_cli, tmp_path):
    for how in ("folder", "pattern"):
        out = tmp_path / how
        out.mkdir()
        (spelled,) = _spell(ddp2_run, how)
        _ok(run_cli(*(a.replace("{in}", spelled).replace("{out}", str(out)) for a in command), "-q"))
        written = sorted(p.name for p in out.iterdir())
        assert any(n.endswith((".0.et", ".0.json")) for n in written), written
        assert any(n.endswith((".1.et", ".1.json")) for n in written), written


def test_a_prefix_named_again_sees_rank_files_added_and_removed(ddp2_run, tmp_path):
    """One command lists a job's folder several times (checks, simulation, comm-group search), so a
    settled folder's listing is kept: a rank file added or removed since must still show, whether
    the folder had settled (the listing kept) or had just changed (not kept)."""
    import os

    for r in (0, 1):
        shutil.copy(ddp2_run.parent / f"ddp2.{r}.et", tmp_path / f"job.{r}.et")
    for settled in (True, False):
        if settled:  # as a job written a while ago
            os.utime(tmp_path, ns=(0, 10**18))
        assert [r for r, _ in expand_traces([tmp_path / "job"])] == [0, 1]
        assert [r for r, _ in expand_traces([tmp_path / "job"])] == [0, 1]
        shutil.copy(ddp2_run.parent / "ddp2.0.et", tmp_path / "job.2.et")
        assert [r for r, _ in expand_traces([tmp_path / "job"])] == [0, 1, 2]
        assert [r for r, _ in expand_traces([tmp_path])] == [0, 1, 2]
        (tmp_path / "job.2.et").unlink()
        assert [p.name for _, p in expand_traces([tmp_path / "job"])] == ["job.0.et", "job.1.et"]


def test_a_folder_of_several_runs_names_them_and_asks_for_one(ddp2_run, tmp_path):
    for name in ("a", "b"):
        for r in (0, 1):
            shutil.copy(ddp2_run.parent / f"ddp2.{r}.et", tmp_path / f"{name}.{r}.et")
    with pytest.raises(InputError, match=r"holds the traces of 2 runs \(a, b\); name one as a PREFIX"):
        expand_traces([tmp_path])
    with pytest.raises(InputError, match="no such file, folder or PREFIX"):
        expand_traces([tmp_path / "c"])
    assert [r for r, _ in expand_traces([f"{tmp_path}/b.*.et"])] == [0, 1]


def test_outputs_named_after_inputs_take_the_prefix_of_a_folder_or_pattern(ddp2_run, run_cli, tmp_path):
    assert output_stem(ddp2_run.parent) == ddp2_run
    assert output_stem(f"{ddp2_run.parent}/ddp2.*.et") == ddp2_run
    assert output_stem(ddp2_run.parent / "ddp2.1.et") == ddp2_run.parent / "ddp2.1"
    # Standard input has no place to put an output beside: -o is asked for, nothing is written.
    res = run_cli("visualize", "-", input=(ddp2_run.parent / "ddp2.0.et").read_bytes())
    assert res.exit_code == 1 and "give -o" in res.stderr
    res = run_cli("jsonize", "-", input=(ddp2_run.parent / "ddp2.0.et").read_bytes())
    assert res.exit_code == 1 and "give -o" in res.stderr


# ---------------------------------------------------------------------------------------------
# Converters: the plain path and Dask take the same inputs


def test_convert_pytorch_takes_a_folder_a_prefix_and_a_pattern(ddp2_run, samples_dir, run_cli, tmp_path):
    d = samples_dir / "pytorch" / "ddp2"
    reference = _rank_bytes(ddp2_run)
    spellings = {
        "folder": [str(d)],  # et.N.json + kineto.N.json + manifest.json, as record_pytorch.py writes them
        "prefix": [str(d / "et"), "-k", str(d / "kineto")],
        "pattern": [f"{d}/*.json"],
    }
    for how, args in spellings.items():
        res = _ok(run_cli("convert", "pytorch", *args, "-o", str(tmp_path / how)))
        assert _rank_bytes(tmp_path / how) == reference, how
        if how != "prefix":  # the manifest beside the traces is skipped, and said so
            assert f"skipped {d / 'manifest.json'}" in res.stderr
    _ok(run_cli("convert", "auto", str(d), "-o", str(tmp_path / "auto"), "-q"))
    assert _rank_bytes(tmp_path / "auto") == reference


def test_a_folder_converts_the_same_with_and_without_workers(ddp2_run, samples_dir, run_cli, tmp_path):
    pytest.importorskip("dask.distributed")
    d = samples_dir / "pytorch" / "ddp2"
    _ok(run_cli("convert", "pytorch", str(d), "-o", str(tmp_path / "plain"), "-q"))
    _ok(run_cli("convert", "pytorch", str(d), "--workers", "2", "-o", str(tmp_path / "dask"), "-q"))
    assert _rank_bytes(tmp_path / "plain") == _rank_bytes(tmp_path / "dask") == _rank_bytes(ddp2_run)
    res = run_cli("convert", "pytorch", "-", "--workers", "2", "-o", str(tmp_path / "x"), input=b"{}")
    assert res.exit_code == 1 and "standard input cannot go to Dask workers" in res.stderr


def test_param_named_folder_pairs_each_et_with_its_kineto(ddp2_run, samples_dir, run_cli, tmp_path):
    """PARAM's DLRM naming: `dlrm_eg_<rank>.json` + `worker<rank>_step_<step>.<timestamp>.pt.trace.json`.
    The timestamp is the last number of the Kineto name: the rank comes from `worker<rank>`."""
    d = samples_dir / "pytorch" / "ddp2"
    folder = tmp_path / "param"
    folder.mkdir()
    for r in (0, 1):
        shutil.copy(d / f"et.{r}.json", folder / f"dlrm_eg_{r}.json")
        shutil.copy(d / f"kineto.{r}.json", folder / f"worker{r}_step_12.169759671499{7 - r}.pt.trace.json")
    _converts_as_ddp2_on_both_paths(run_cli, folder, tmp_path, ddp2_run)


def test_a_one_gpu_folder_without_rank_numbers(run_cli, tmp_path):
    """tools/record_pytorch.py's one-GPU folders name no rank (et.json.gz, kineto.json.gz), beside a
    timing.json and a second, Kineto-only recording: files are kept by their content, the timing is
    skipped, and two Kineto traces for one ET is a clear error, not a guess."""
    src = GPU / "fp32"
    res = run_cli("convert", "pytorch", str(src), "-o", str(tmp_path / "all"))
    assert res.exit_code == 1
    assert f"skipped {src / 'timing.json'}" in res.stderr
    assert "kineto.json.gz" in res.stderr and "kineto_only.json.gz" in res.stderr and "apart" in res.stderr
    pair = tmp_path / "pair"
    pair.mkdir()
    for name in ("et.json.gz", "kineto.json.gz", "timing.json"):
        shutil.copy(src / name, pair / name)
    _ok(run_cli("convert", "pytorch", str(pair), "-o", str(tmp_path / "folder"), "-q"))
    _ok(run_cli("convert", "pytorch", str(src / "et.json.gz"), "-k", str(src / "kineto.json.gz"),
                "-o", str(tmp_path / "named"), "-q"))  # fmt: skip
    assert (tmp_path / "folder.0.et").read_bytes() == (tmp_path / "named.0.et").read_bytes()
    if importlib.util.find_spec("dask") is not None:  # on Dask too: one rank, rank 0
        _ok(run_cli("convert", "pytorch", str(pair), "--workers", "1", "-o", str(tmp_path / "dask"), "-q"))
        assert (tmp_path / "dask.0.et").read_bytes() == (tmp_path / "named.0.et").read_bytes()
    # The same ET piped in: one rank, the same trace as without its Kineto file named.
    _ok(
        run_cli("convert", "pytorch", "-", "-o", str(tmp_path / "piped"), "-q", input=(src / "et.json.gz").read_bytes())
    )
    _ok(run_cli("convert", "pytorch", str(src / "et.json.gz"), "-o", str(tmp_path / "alone"), "-q"))
    assert (tmp_path / "piped.0.et").read_bytes() == (tmp_path / "alone.0.et").read_bytes()


def test_other_converters_take_folders_patterns_and_stdin(ddp2_run, samples_dir, run_cli, tmp_path):
    # convert json: a folder of JSON traces (jsonize's output) and the pattern of them
    js = tmp_path / "js"
    js.mkdir()
    _ok(run_cli("jsonize", str(ddp2_run), "-o", str(js / "ddp2"), "-q"))
    _ok(run_cli("convert", "json", str(js), "-o", str(tmp_path / "back"), "-q"))
    _ok(run_cli("dejsonize", f"{js}/*.json", "-o", str(tmp_path / "back2"), "-q"))
    assert _rank_bytes(tmp_path / "back") == _rank_bytes(tmp_path / "back2") == _rank_bytes(ddp2_run)
    # convert cupti: the folder holding the one records file; convert text: the workload on stdin
    cupti = samples_dir / "cupti"
    _ok(run_cli("convert", "cupti", str(cupti), "-o", str(tmp_path / "c1"), "-q"))
    _ok(run_cli("convert", "cupti", str(next(cupti.iterdir())), "-o", str(tmp_path / "c2"), "-q"))
    assert (tmp_path / "c1.0.et").read_bytes() == (tmp_path / "c2.0.et").read_bytes()
    text = samples_dir / "astrasim" / "text_workloads" / "MLP_ModelParallel.txt"
    _ok(run_cli("convert", "text", "-", "--npus", "4", "-o", str(tmp_path / "t1"), "-q", input=text.read_bytes()))
    _ok(run_cli("convert", "text", str(text), "--npus", "4", "-o", str(tmp_path / "t2"), "-q"))
    assert (tmp_path / "t1.3.et").read_bytes() == (tmp_path / "t2.3.et").read_bytes()


def test_the_inputs_table_names_every_command_and_format():
    from chakra.cli import COMMANDS
    from chakra.converters import PLUGINS

    text = (REPO / "docs" / "inputs.md").read_text()
    table = text.split("## Which command takes what", 1)[1].split("\n## ", 1)[0]
    missing = [c for c in COMMANDS if f"`{c}" not in table and f" `{c}`" not in table and f"`{c} " not in table]
    missing += [f for f in PLUGINS if f not in table]
    assert not missing, f"docs/inputs.md does not say what these take: {missing}"


def test_kineto_options_take_a_folder_shared_with_the_ets(samples_dir, run_cli, tmp_path):
    """`-k FOLDER` (convert pytorch, memory) keeps the folder's Kineto traces, told by content."""
    d = samples_dir / "pytorch" / "ddp2mem"
    ets = [str(d / "et.0.json.gz"), str(d / "et.1.json.gz")]
    kins = [str(d / "kineto.0.json.gz"), str(d / "kineto.1.json.gz")]
    _ok(run_cli("convert", "pytorch", *ets, "-k", kins[0], "-k", kins[1], "-o", str(tmp_path / "named"), "-q"))
    _ok(run_cli("convert", "pytorch", *ets, "-k", str(d), "-o", str(tmp_path / "folder"), "-q"))
    assert _rank_bytes(tmp_path / "folder") == _rank_bytes(tmp_path / "named")
    named = json.loads(_ok(run_cli("memory", str(tmp_path / "named"), "-k", kins[0], "-k", kins[1], "--json")).stdout)
    folder = json.loads(_ok(run_cli("memory", str(tmp_path / "named"), "-k", str(d), "--json")).stdout)
    assert folder == named and named["ranks"]["1"]["allocator"]["kineto"] == kins[1]


def test_a_spec_on_standard_input_is_the_spec_file(run_cli, tmp_path):
    spec = REPO / "examples" / "two_stage_pipeline.yaml"
    _ok(run_cli("generate", "spec", "-", "-o", str(tmp_path / "piped"), "-q", input=spec.read_bytes()))
    _ok(run_cli("generate", "spec", str(spec), "-o", str(tmp_path / "named"), "-q"))
    assert [(tmp_path / f"piped.{r}.et").read_bytes() for r in range(4)] == [
        (tmp_path / f"named.{r}.et").read_bytes() for r in range(4)
    ]


def test_profiler_default_names_pair_by_distributed_info_on_both_paths(ddp2_run, samples_dir, run_cli, tmp_path):
    """torch.profiler's tensorboard_trace_handler names a trace `<host>_<pid>.<timestamp>.pt.trace.json`:
    no rank in the name, and its last number is a timestamp. The rank is the one the trace records
    (distributedInfo.rank), with and without --workers."""
    d = samples_dir / "pytorch" / "ddp2"
    folder = tmp_path / "tb"
    folder.mkdir()
    for r, (pid, stamp) in enumerate(((48213, 1697596714999), (48214, 1697596714311))):
        shutil.copy(d / f"et.{r}.json", folder / f"et.{r}.json")
        shutil.copy(d / f"kineto.{r}.json", folder / f"gpuhost_{pid}.{stamp}.pt.trace.json")
    _converts_as_ddp2_on_both_paths(run_cli, folder, tmp_path, ddp2_run)


def test_messages_call_standard_input_dash(samples_dir, run_cli):
    """An error about what came in on standard input names it as the user typed it, `-`, never the
    temporary copy."""
    manifest = (samples_dir / "pytorch" / "ddp2" / "manifest.json").read_bytes()
    res = run_cli("convert", "pytorch", "-", "-o", "unused", input=manifest)
    assert res.exit_code == 1 and res.stderr.startswith("error: -: ") and "chakra-stdin" not in res.stderr
    res = run_cli("convert", "bigsim", "-", "-o", "unused", input=manifest)
    assert res.exit_code == 1 and "standard input is not an input here" in res.stderr
