#!/usr/bin/env bash
# Make .venv with ceiling built and installed from this checkout.
#   scripts/bootstrap.sh          the tool
#   scripts/bootstrap.sh --test   the tool and the test suite's needs
# Needs only python3, a C compiler and make; everything else comes from PyPI.
# Exit 8: no C compiler (the C core cannot be built).
set -eu
cd "$(dirname "$0")/.."
venv=${CEILING_VENV:-.venv}
extras=""
[ "${1:-}" = "--test" ] && extras="[test,mpi]"
# One line per step on stderr: the first build takes a minute, and a log should say why.
step() { echo "ceiling setup: $*" >&2; }

cc=${CC:-cc}
if ! command -v "$cc" >/dev/null 2>&1; then
    echo "ceiling: no C compiler found ('$cc' is not on PATH): install gcc (apt-get install gcc) or set CC" >&2
    exit 8
fi
export CC="$cc"

if [ ! -x "$venv/bin/python" ]; then
    step "creating the virtual environment $venv"
    if ! python3 -m venv "$venv" 2>/dev/null; then
        # Debian's python3 without python3-venv has no ensurepip: make the venv
        # without pip and install pip from its wheel on PyPI.
        rm -rf "$venv"
        python3 -m venv --without-pip "$venv"
        "$venv/bin/python" - <<'PY'
import json, os, tempfile, urllib.request, subprocess, sys
meta = json.load(urllib.request.urlopen("https://pypi.org/pypi/pip/json", timeout=60))
url = next(u["url"] for u in meta["urls"] if u["filename"].endswith(".whl"))
path = os.path.join(tempfile.mkdtemp(), os.path.basename(url))
urllib.request.urlretrieve(url, path)
subprocess.check_call([sys.executable, os.path.join(path, "pip"), "install", "-q", path])
PY
    fi
fi
step "updating pip"
"$venv/bin/python" -m pip install -q --upgrade pip >/dev/null 2>&1 || true
if [ -n "$extras" ]; then
    step "building the C core and installing ceiling with the test and MPI needs (pytest, mpi4py, MPICH; a few minutes the first time)"
else
    step "building the C core and installing ceiling (about a minute the first time)"
fi
if ! "$venv/bin/python" -m pip install -q ".$extras" && [ "$extras" = "[test,mpi]" ]; then
    # No MPI wheel for this platform: the MPI tests then skip, saying why.
    echo "ceiling: mpi4py/MPICH could not be installed; installing without them (MPI tests will be skipped)" >&2
    "$venv/bin/python" -m pip install -q ".[test]"
fi
step "ready: $venv/bin/ceiling"
