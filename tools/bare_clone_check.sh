#!/usr/bin/env bash
# `make check`: does the committed HEAD stand alone? Clone it into an empty temporary folder (so no
# ../shared or other checkout lies beside it) and run `make demo` there.
#
#   tools/bare_clone_check.sh            full check: the clone's `make demo` builds its own .venv
#   tools/bare_clone_check.sh --reuse    faster (the test suite uses it): a new venv borrows the installed
#                                        dependencies of this checkout's venv ($REUSE_PYTHON, else
#                                        .venv/bin/python) through a .pth line, gets only the clone itself
#                                        (pip install --no-deps -e, built in an isolated environment with the
#                                        setuptools pyproject.toml asks for, never this machine's own), and
#                                        the clone's demo runs with VENV= pointing at it, so the demo runs
#                                        the clone's code, not this checkout's. Nothing comes from the
#                                        machine's site-packages: a hand-installed package cannot hide a
#                                        missing set-up step.
# Uncommitted changes are not in the clone: commit first.
set -euo pipefail
REPO="$(cd "$(dirname "$0")/.." && pwd)"
WORK="$(mktemp -d "${TMPDIR:-/tmp}/chakra-bare-clone.XXXXXX")"
trap 'rm -rf "$WORK"' EXIT
git clone -q --no-hardlinks "$REPO" "$WORK/chakra"
cd "$WORK/chakra"
echo "bare clone of $(git rev-parse --short HEAD) in $WORK/chakra"
if [ "${1:-}" = "--reuse" ]; then
  BASE_PY="${REUSE_PYTHON:-$REPO/.venv/bin/python}"
  [ -x "$BASE_PY" ] || { echo "error: $BASE_PY not found: run make setup first (or set REUSE_PYTHON)" >&2; exit 1; }
  "$BASE_PY" -m venv --without-pip "$WORK/venv"
  # A plain path line: the borrowed folder's own .pth files (its editable chakra) stay inactive.
  base_lib="$("$BASE_PY" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
  new_lib="$("$WORK/venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
  echo "$base_lib" > "$new_lib/zz_chakra_reuse.pth"
  "$WORK/venv/bin/python" -m pip install -q --no-deps -e .
  touch "$WORK/venv/.installed"  # tells the Makefile the venv is set up
  where="$("$WORK/venv/bin/python" -c 'import chakra, os; print(os.path.dirname(chakra.__file__))')"
  case "$where" in "$WORK/chakra"/*) ;; *) echo "error: the venv imports chakra from $where, not the clone" >&2; exit 1;; esac
  make --no-print-directory demo VENV="$WORK/venv" OUT="$WORK/out"
else
  make --no-print-directory demo OUT="$WORK/out"
fi
test -s "$WORK/out/ddp2.0.et" && test -s "$WORK/out/ddp2.timeline.json"
echo "bare clone check: ok"
