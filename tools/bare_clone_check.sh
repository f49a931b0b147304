#!/usr/bin/env bash
# `make check`: does the committed HEAD stand alone? Clone it into an empty temporary folder (so no
# ../shared or other checkout lies beside it) and run `make demo` there.
#
#   tools/bare_clone_check.sh            full check: the clone's `make demo` builds its own .venv
#   tools/bare_clone_check.sh --reuse    faster (the test suite uses it): a venv that sees this
#                                        machine's installed packages (--system-site-packages) gets
#                                        only the clone itself (pip install --no-deps -e), and the
#                                        clone's demo runs with VENV= pointing at it, so the demo
#                                        still runs the clone's code, not this checkout's.
# Uncommitted changes are not in the clone: commit first.
set -euo pipefail
REPO="$(cd "$(dirname "$0")/.." && pwd)"
WORK="$(mktemp -d "${TMPDIR:-/tmp}/chakra-bare-clone.XXXXXX")"
trap 'rm -rf "$WORK"' EXIT
git clone -q --no-hardlinks "$REPO" "$WORK/chakra"
cd "$WORK/chakra"
echo "bare clone of $(git rev-parse --short HEAD) in $WORK/chakra"
if [ "${1:-}" = "--reuse" ]; then
  # --without-pip: the venv then uses this machine's pip and setuptools (new enough for pyproject.toml)
  # instead of the older copies a fresh venv bundles.
  python3 -m venv --system-site-packages --without-pip "$WORK/venv"
  "$WORK/venv/bin/python" -m pip install -q --no-deps --no-build-isolation -e .
  touch "$WORK/venv/.installed"  # tells the Makefile the venv is set up
  where="$("$WORK/venv/bin/python" -c 'import chakra, os; print(os.path.dirname(chakra.__file__))')"
  case "$where" in "$WORK/chakra"/*) ;; *) echo "error: the venv imports chakra from $where, not the clone" >&2; exit 1;; esac
  make --no-print-directory demo VENV="$WORK/venv" OUT="$WORK/out"
else
  make --no-print-directory demo OUT="$WORK/out"
fi
test -s "$WORK/out/ddp2.0.et" && test -s "$WORK/out/ddp2.timeline.json"
echo "bare clone check: ok"
