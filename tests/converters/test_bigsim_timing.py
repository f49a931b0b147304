"""TRACEBIGSIM timing samples: the real NAMD sample file and emulator `param.<pe>` lines."""

from __future__ import annotations

import math
from collections import Counter
from pathlib import Path

import pytest

from chakra.converters.bigsim import TimingSample, read_param_files, read_timing_samples
from chakra.errors import TraceFormatError


def test_namd_sample_file(samples_dir: Path) -> None:
    path = samples_dir / "bigsim" / "sample_namd_timings.txt"
    samples = read_timing_samples(path)
    lines = [ln for ln in path.read_text().splitlines() if ln.startswith("TRACEBIGSIM:")]
    assert len(samples) == len(lines) == 1000
    assert Counter(s.name for s in samples) == {
        "calc_pair_energy_fullelect": 870,
        "calc_self_energy_fullelect": 112,
        "angles": 9,
        "dihedrals": 9,
    }
    first = samples[0]
    assert isinstance(first, TimingSample)
    assert (first.name, first.time_s, first.params, first.papi) == (
        "angles",
        0.020026,
        [1.0, 5790.0],
        [33136473, 18194, 1772428],
    )
    assert first.line == 6 and first.seqno is None and first.pe is None and first.has_time
    # every sample: a time, and as many params as its line prints
    for s, line in zip(samples, lines):
        assert s.has_time and s.time_s >= 0
        assert len(s.params) == len(line.split("params:{")[1].split("}")[0].split())
    assert {len(s.params) for s in samples if s.name.startswith("calc_self")} == {14}


def test_param_files_from_the_emulator(tmp_path: Path) -> None:
    # built to the documented emulator form (seqno prefix and field, no time); no public sample exists
    (tmp_path / "param.0").write_text(
        "3 TRACEBIGSIM: event:{ PairCalculator::bwMultiplyHelper } seqno: { 3 }  params:{ 16384.00 1.00 220.00 }\n"
        "some program output\n"
        "7 TRACEBIGSIM: event:{ angles } seqno: { 7 } time:{ 0.000500 } params:{ 2.0 }\n"
    )
    (tmp_path / "param.1").write_text("0 TRACEBIGSIM: event:{ angles } seqno: { 0 } params:{ 5.0 }\n")
    (tmp_path / "bgTrace").write_bytes(b"")  # unrelated files are ignored
    samples = read_param_files(tmp_path)
    assert [(s.pe, s.seqno, s.name) for s in samples] == [
        (0, 3, "PairCalculator::bwMultiplyHelper"),
        (0, 7, "angles"),
        (1, 0, "angles"),
    ]
    assert math.isnan(samples[0].time_s) and not samples[0].has_time
    assert samples[0].params == [16384.0, 1.0, 220.0]
    assert samples[1].time_s == 0.0005 and samples[1].line == 3


def test_malformed_lines(tmp_path: Path) -> None:
    bad = tmp_path / "timings.txt"
    bad.write_text("# header\nTRACEBIGSIM: event:{ x } time:{ 0.1 } params:{ 1.0 oops }\n")
    with pytest.raises(TraceFormatError, match=r"timings.txt \(line 2\): non-numeric params"):
        read_timing_samples(bad)
    bad.write_text("TRACEBIGSIM: time:{ 0.1 }\n")
    with pytest.raises(TraceFormatError, match=r"line 1\): TRACEBIGSIM line without an event"):
        read_timing_samples(bad)
    bad.write_text("no samples here\n")
    with pytest.raises(TraceFormatError, match="no TRACEBIGSIM lines"):
        read_timing_samples(bad)
