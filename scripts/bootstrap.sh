#!/usr/bin/env bash
# Make .venv with ceiling built and installed from this checkout.
#   scripts/bootstrap.sh          the tool
#   scripts/bootstrap.sh --test   the tool and the test suite's needs
# Needs only python3, a C compiler and make; everything else comes from PyPI.
# Exit 8: no C compiler (the C core cannot be built).
set -eu
cd "$(dirname "$0")/.."
venv=${CEILING_VENV:-.venv}
test=0
[ "${1:-}" = "--test" ] && test=1
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
if [ "$test" = 1 ]; then
    step "building the C core and installing ceiling with the test and MPI needs (pytest, mpi4py, MPICH; a few minutes the first time)"
    # The optional pieces, best first: the MPI wheels (the MPI tests) and the otf2 wheel (OTF2's
    # library, for `ceiling trace --format otf2`); where one has no wheel for this platform the
    # next set goes without it, said below, and what needs it skips or says what is missing.
    tries="test,mpi,otf2 test,otf2 test,mpi test"
else
    step "building the C core and installing ceiling (about a minute the first time)"
    tries="otf2 -"
fi
for extras in $tries; do
    spec="."
    [ "$extras" != "-" ] && spec=".[$extras]"
    if "$venv/bin/python" -m pip install -q "$spec"; then
        break
    fi
    [ "$extras" = "${tries##* }" ] && exit 1       # the last set failed too: pip said why
done
case ",$extras," in *,otf2,*) ;; *)
    echo "ceiling: the otf2 package (OTF2's library) could not be installed; installed without it: ceiling trace --format otf2 will say what is missing (pip install otf2, or Debian's libopen-trace-format2-10)" >&2 ;;
esac
if [ "$test" = 1 ]; then
    case ",$extras," in *,mpi,*) ;; *)
        # No MPI wheel for this platform: the MPI tests then skip, saying why.
        echo "ceiling: mpi4py/MPICH could not be installed; installed without them (MPI tests will be skipped)" >&2 ;;
    esac
fi
step "ready: $venv/bin/ceiling"
