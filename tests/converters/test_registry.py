"""The converter registry: every bundled sample is recognised as exactly one format, and the
format lists (help, auto) come from the plugins' own declarations."""

from __future__ import annotations

import fnmatch
import gzip
import os
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from chakra.converters import PLUGINS, detect, detect_format, plugins, read_prefix
from chakra.converters.cupti.records import export_cupti_records
from chakra.errors import InputError

FLEXFLOW = Path(__file__).resolve().parents[1] / "data" / "flexflow"

#: Every file of tests/data/samples (first matching pattern wins) -> the format it is, or None
#: for files that are no converter's input (Chakra .et already, configs, notes). A new sample
#: must be added here, so its detection is checked.
SAMPLE_FORMATS = [
    ("SOURCES.md", None),
    ("astrasim/all_reduce_8npus_1MB/*.et", None),
    ("astrasim/configs_rt_template/*", None),
    ("astrasim/custom_ring_allreduce_8npus_1MB/*.et", None),  # ASTRA-sim's custom-algorithm example: .et already
    ("astrasim/examples/*", None),  # ASTRA-sim's own examples/ (traces already Chakra, its configs and run scripts)
    ("astrasim/text_workloads/*.txt", "text"),
    ("bigsim/sample_namd_timings.txt", None),  # TRACEBIGSIM timing lines: input of `chakra interpolate`
    ("bigsim/text2log_v6_examples.tgz", None),  # a tarball of log folders: unpacked below
    ("cupti/*.cupti.jsonl", "cupti"),  # records exported from nsys/testcuda_nsys2026.1_report2.sqlite
    ("et/official_small_chakra.0.json", "json"),
    ("et/feeder_tests_trace.tar.gz", None),  # a tarball of a Chakra .et (the official feeder test trace)
    ("kineto/*.json.gz", "kineto"),
    ("kineto/*.tar.gz", "kineto"),  # a tarball of Kineto traces (PARAM's DLRM): its first .json member is read
    ("nsys/*.sqlite", "nsys"),
    ("pytorch/*/et.*.json", "pytorch"),
    ("pytorch/*/kineto.*.json", "kineto"),
    ("pytorch/*/et.*.json.gz", "pytorch"),  # the trace zoo
    ("pytorch/*/kineto.*.json.gz", "kineto"),
    ("pytorch/*/manifest.json", None),
    ("record/SOURCES.md", None),
    ("record/*/et.*.json.gz", "pytorch"),  # a chakra.record.Recorder recording
    ("record/*/kineto.*.json.gz", "kineto"),
    ("record/*/manifest.json", None),  # its untraced step times
    ("pytorch_et/*", "pytorch"),  # .json.gz, and .tgz/.tar.gz whose .json member is read
    ("pytorch_etplus/*.json.gz", "pytorch"),  # the official linker's ET+: an ET with Kineto's figures
    ("pytorch_gpu/*/et.json.gz", "pytorch"),
    ("pytorch_gpu/*/kineto.json.gz", "kineto"),
    ("pytorch_gpu/*/timing.json", None),
]

#: Members of the BigSim tarball (a folder per case).
BIGSIM_MEMBERS = [
    ("*/bgTrace*", "bigsim"),
    ("*/detail-*.log", "bigsim"),
    ("*/log*.txt", None),  # text2log's own input, not a BigSim log
]


def _untar(archive: Path, dest: Path) -> None:
    with tarfile.open(archive) as tar:
        if hasattr(tarfile, "data_filter"):  # Python versions with extraction filters
            tar.extractall(dest, filter="data")
        else:
            tar.extractall(dest)


def _expected(rel: str, table) -> str | None:
    for pattern, fmt in table:
        if fnmatch.fnmatch(rel, pattern):
            return fmt
    pytest.fail(f"{rel}: no entry in the table of sample formats; add one")


def _formats(found: list[str]) -> str | None:
    assert len(found) <= 1, f"more than one plugin accepts it: {found}"
    return found[0] if found else None


def test_every_sample_is_exactly_one_format(samples_dir):
    seen = set()
    for path in sorted(p for p in samples_dir.rglob("*") if p.is_file()):
        rel = path.relative_to(samples_dir).as_posix()
        want = _expected(rel, SAMPLE_FORMATS)
        assert _formats(detect(path)) == want, rel
        if want is not None:
            assert detect_format([path]) == want, rel  # what `chakra convert auto` converts it as
        seen.add(want)
    assert seen >= set(PLUGINS) - {"bigsim", "cupti", "flexflow"}  # those three are checked below


def test_bigsim_tarball_members_and_folders(samples_dir, tmp_path):
    _untar(samples_dir / "bigsim" / "text2log_v6_examples.tgz", tmp_path)
    cases = sorted(p for p in (tmp_path / "examples").iterdir() if p.is_dir())
    assert len(cases) == 10
    for case in cases:
        assert detect(case) == ["bigsim"], case  # the folder itself is what `convert bigsim DIR` takes
        for path in sorted(case.iterdir()):
            assert _formats(detect(path)) == _expected(f"{case.name}/{path.name}", BIGSIM_MEMBERS), path


def test_pytorch_tarball_members(samples_dir, tmp_path):
    # The registry reads the first .json member of a tarball; the members on their own agree.
    for name in ("chakra_1.0.2-chakra.0.0.4.tgz", "param_1.1.1_pt2_et.json.tar.gz"):
        dest = tmp_path / name
        with tarfile.open(samples_dir / "pytorch_et" / name) as tar:
            members = [m for m in tar.getmembers() if m.isfile()]
            for m in members:
                f = tar.extractfile(m)
                assert f is not None
                (dest / m.name).parent.mkdir(parents=True, exist_ok=True)
                (dest / m.name).write_bytes(f.read())
        for m in members:
            base = Path(m.name).name
            want = "pytorch" if base.endswith(".json") and not base.startswith("._") else None
            assert _formats(detect(dest / m.name)) == want, m.name


def test_cupti_records_and_flexflow_graphs(samples_dir, tmp_path, run_cli):
    records = tmp_path / "records.json"
    export_cupti_records(samples_dir / "nsys" / "testcuda_nsys2026.1_report2.sqlite", records)
    assert detect(records) == ["cupti"]
    res = run_cli("convert", "auto", str(records), "-o", str(tmp_path / "c"))
    assert res.exit_code == 0 and "detected format: cupti" in res.stderr, res.stderr
    assert (tmp_path / "c.0.et").is_file()
    for dot in sorted(FLEXFLOW.glob("*.dot")):
        assert detect(dot) == ["flexflow"], dot


def test_prefix_is_read_once_through_gzip_and_survives_truncation(samples_dir, tmp_path):
    src = samples_dir / "kineto" / "hta_nccl_data.json.gz"
    whole = gzip.decompress(src.read_bytes())
    assert read_prefix(src) == whole[: len(read_prefix(src))] and len(read_prefix(src)) == 64 * 1024
    cut = tmp_path / "cut.json.gz"
    cut.write_bytes(src.read_bytes()[:3000])  # a download that stopped early
    head = read_prefix(cut)
    assert 0 < len(head) < 64 * 1024 and whole.startswith(head)
    assert detect(cut) == ["kineto"]


def test_detect_format_errors_name_the_input(samples_dir, tmp_path):
    with pytest.raises(InputError, match="SOURCES.md: format not recognised"):
        detect_format([samples_dir / "SOURCES.md"])
    mixed = [samples_dir / "pytorch" / "mlp" / "et.0.json", samples_dir / "nsys" / "testcuda_nsys2026.1_report2.sqlite"]
    with pytest.raises(InputError, match="is nsys but earlier inputs are pytorch"):
        detect_format(mixed)
    mlp = samples_dir / "pytorch" / "mlp"
    assert detect_format([mlp / "kineto.0.json", mlp / "et.0.json"]) == "pytorch"  # ET + its Kineto trace
    assert detect_format([mlp / "kineto.0.json"]) == "kineto"
    with pytest.raises(InputError, match="nope: no such file"):
        detect_format([tmp_path / "nope"])


def test_every_plugin_declares_the_contract():
    for name, module in plugins().items():
        assert name == module.NAME
        assert module.DESCRIPTION and "\n" not in module.DESCRIPTION
        assert module.EXTENSIONS and all(isinstance(e, str) for e in module.EXTENSIONS)
        assert callable(module.accept) and callable(module.convert) and callable(module.add_cli)
        assert module.accept(b"") is False


def test_convert_help_lists_every_format_with_its_description():
    env = {**os.environ, "COLUMNS": "400"}
    proc = subprocess.run(
        [sys.executable, "-m", "chakra.cli", "convert", "--help"], capture_output=True, text=True, env=env
    )
    assert proc.returncode == 0 and proc.stderr == ""
    for name, module in plugins().items():
        assert f" {name} " in proc.stdout and module.DESCRIPTION.rstrip(".") in proc.stdout, name
    assert " auto " in proc.stdout


@pytest.mark.parametrize(
    ("fmt", "sample", "ranks"),
    [
        ("pytorch", "pytorch/mlp/et.0.json", 1),
        (
            "pytorch",
            "pytorch/ddp2/et.0.json pytorch/ddp2/et.1.json pytorch/ddp2/kineto.0.json pytorch/ddp2/kineto.1.json",
            2,
        ),
        ("kineto", "kineto/hta_triton_example.json.gz", 1),
        ("nsys", "nsys/testcuda_nsys2026.1_report2.sqlite", 1),
        ("json", "et/official_small_chakra.0.json", 1),
        ("pytorch", "pytorch_et/param_1.1.1_pt2_et.json.tar.gz", 1),
    ],
)
def test_convert_auto_picks_the_format(run_cli, samples_dir, tmp_path, fmt, sample, ranks):
    res = run_cli("convert", "auto", *(str(samples_dir / s) for s in sample.split()), "-o", str(tmp_path / "o"))
    assert res.exit_code == 0, res.stderr
    assert f"detected format: {fmt}" in res.stderr
    assert len(list(tmp_path.glob("o.*.et"))) == ranks


def test_convert_auto_bigsim_folder_and_flexflow(run_cli, samples_dir, tmp_path):
    _untar(samples_dir / "bigsim" / "text2log_v6_examples.tgz", tmp_path / "logs")
    res = run_cli("convert", "auto", str(tmp_path / "logs" / "examples" / "case3"), "-o", str(tmp_path / "b"))
    assert res.exit_code == 0 and "detected format: bigsim" in res.stderr, res.stderr
    assert len(list(tmp_path.glob("b.*.et"))) >= 1
    res = run_cli("convert", "auto", str(FLEXFLOW / "mp2_taskgraph.dot"), "-o", str(tmp_path / "f"))
    assert res.exit_code == 0 and "detected format: flexflow" in res.stderr, res.stderr
