"""How the `chakra` program ends (`chakra.cli.run`): without the interpreter's teardown where that
is safe, and with everything a normal exit gives a caller: the exit code, the whole output on a
pipe, the exit handlers run. `chakra.cli.main` (what a Python caller gets) still raises SystemExit."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import orjson

SAMPLES = Path(__file__).resolve().parents[1] / "data" / "samples" / "astrasim"
TRACE = SAMPLES / "all_reduce_8npus_1MB" / "all_reduce"
NETWORK = SAMPLES / "configs_rt_template" / "network_cfg.yml"
SYSTEM = SAMPLES / "configs_rt_template" / "system_cfg.json"

# the program as the console script runs it, with an exit handler and (optionally) a thread of
# its own; the handler's line must come after the command's output
PROGRAM = r"""
import atexit, os, sys, threading, time
atexit.register(lambda: print("exit handler ran", file=sys.stderr, flush=True))
class Left:  # alive until the interpreter's teardown, which frees it
    def __del__(self):
        os.write(2, b"torn down\n")
left = Left()
if sys.argv[1] == "thread":  # still running when the command ends: the interpreter waits for it
    threading.Thread(target=time.sleep, args=(1.0,), daemon=False).start()
sys.argv = ["chakra", *sys.argv[2:]]
from chakra.cli import run
run()
"""


def _program(*args: str, thread: bool = False) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", PROGRAM, "thread" if thread else "plain", *args],
        capture_output=True,
        timeout=120,
    )


def test_a_finished_command_keeps_its_output_code_and_exit_handlers():
    proc = _program("simulate", str(TRACE), "--network", str(NETWORK), "--system", str(SYSTEM), "--json", "-q")
    assert proc.returncode == 0, proc.stderr
    result = orjson.loads(proc.stdout)  # the whole document reached the pipe
    assert sorted(result["ranks"], key=int) == [str(r) for r in range(8)]
    assert {r["finish_ns"] for r in result["ranks"].values()} == {117780}  # ASTRA-sim's figure
    assert proc.stderr.decode().splitlines()[-1] == "exit handler ran"  # and no teardown after it


def test_an_error_keeps_its_exit_code():
    proc = _program("simulate", str(TRACE.parent / "missing"), "--network", str(NETWORK))
    assert proc.returncode == 1
    lines = proc.stderr.decode().splitlines()
    assert lines[0].startswith("error: ") and "missing" in lines[0]
    assert lines[-1] == "exit handler ran"
    assert "Traceback" not in proc.stderr.decode()


def test_another_thread_gets_the_usual_exit():
    # a thread still running (an executor, a client) is left to the interpreter's own shutdown,
    # which waits for it before the exit handlers
    proc = _program("simulate", str(TRACE), "--network", str(NETWORK), "--system", str(SYSTEM), "--json", "-q",
                    thread=True)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert orjson.loads(proc.stdout)["ranks"]["0"]["finish_ns"] == 117780
    assert proc.stderr.decode().splitlines()[-2:] == ["exit handler ran", "torn down"]


def test_main_still_raises_system_exit():
    script = (
        "import sys\n"
        "sys.argv = ['chakra', '--version']\n"
        "from chakra.cli import main\n"
        "try:\n    main()\nexcept SystemExit as exc:\n    print('caught', exc.code)\n"
    )
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines()[-1] == "caught 0"
