"""BigSim logs with values out of range: one error naming the file and the SEB, nothing written."""

from __future__ import annotations

import pytest

from .bad_input import FUZZ, assert_clean_error

# minimized fuzzer input -> (extra options, the file and place the error must name)
CASES = {
    "LEFTOVER_out": ((), "bgTrace0 (byte offset 584): proc 1 SEB 1 (msgep): unknown MPI collective code 16512"),
    "MemoryError_converters_bigsim_binary_py_364": ((), "bgTrace: no timeline for procs 2, 3, 4, 5, 6, 7, 8, 9 ..."),
    "ValueError_chakra_schema_attrs_py_106": (
        ("--detail",),
        "detail-0-0-0.1.log: proc 1 SEB 0 (ep): message 99999999999999999999 has a field",
    ),
    "ValueError_converters_bigsim_convert_py_156": (
        ("--detail",),
        "detail-0-0-0.1.log: proc 1 SEB 0 (p): start 999999999999999.0 s / execTime 7.0 s out of range",
    ),
    "ValueError_converters_bigsim_convert_py_289": (
        ("--detail",),
        "detail-0-0-0.0.log: proc 0 SEB 4 (Event_4): ep 9223372036854775808 does not fit 64 bits",
    ),
    "ValueError_converters_bigsim_detail_py_137": (("--detail",), "detail-0-0-0.3.log (line 3): unreadable number"),
    # a summary claiming 65535 procs beside one detail dump once wrote 65535 rank files
    "HANG_detail_summary_claims_65535_procs": (
        ("--detail",),
        "the summary announces 65535 procs, but there is no detail dump for procs 1, 2, 3",
    ),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_minimized_fuzz_inputs_fail_cleanly(run_cli, tmp_path, case):
    options, expected = CASES[case]
    log = FUZZ / "bigsim" / case
    result = run_cli("convert", "bigsim", str(log), "-o", str(tmp_path / "o"), *options)
    assert_clean_error(result, tmp_path, str(log), expected)
