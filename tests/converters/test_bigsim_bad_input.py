"""BigSim logs with values out of range: one error naming the file and the SEB, nothing written."""

from __future__ import annotations

import pytest

from .bad_input import FUZZ, assert_clean_error

# minimized fuzzer input -> (extra options, the file and place the error must name)
CASES = {
    "unknown_mpi_code": ((), "bgTrace0 (byte offset 584): proc 1 SEB 1 (msgep): unknown MPI collective code 16512"),
    "procs_without_timeline": ((), "bgTrace: no timeline for procs 2, 3, 4, 5, 6, 7, 8, 9 ..."),
    "detail_message_id_too_big": (
        ("--detail",),
        "detail-0-0-0.1.log: proc 1 SEB 0 (ep): message 99999999999999999999 has a field",
    ),
    "detail_start_out_of_range": (
        ("--detail",),
        "detail-0-0-0.1.log: proc 1 SEB 0 (p): start 999999999999999.0 s / execTime 7.0 s out of range",
    ),
    "detail_ep_over_64_bits": (
        ("--detail",),
        "detail-0-0-0.0.log: proc 0 SEB 4 (Event_4): ep 9223372036854775808 does not fit 64 bits",
    ),
    "detail_unreadable_number": (("--detail",), "detail-0-0-0.3.log (line 3): unreadable number"),
    # a summary claiming 65535 procs beside one detail dump once wrote 65535 rank files
    "summary_claims_65535_procs": (
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
