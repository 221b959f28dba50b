#!/usr/bin/env bash
# The tests that start MPI ranks again under Open MPI and the distribution's mpi4py: ceiling's MPI
# code must work with any MPI and the mpi4py a cluster already has, and `make test`
# runs them with the MPICH wheel and the newest mpi4py only. The srun tests run too
# (srun --mpi=pmix) where a Slurm answers, as scripts/slurm-test-node.sh sets one up.
#
# Uses Debian's packages (Open MPI 4.1, mpi4py 3.1 built against it, and the test
# needs), installed here when run as root with apt, and Debian's /usr/bin/python3
# with a copy of the ceiling that `make test` built in .venv (the C core is a plain
# library loaded with ctypes: no Python ABI ties it to that interpreter). Nothing is
# compiled. Exit 0 with a message when these cannot be had; a failing test fails.
# With --install-only it installs the packages and stops there (.ci/run does so beside the build);
# with --if-installed it never installs and skips when they are missing (`make test` runs it so, beside
# its serial pass: scripts/run-tests.sh).
# OMPI_PYTEST_ARGS adds options to pytest (--cpu-times=FILE: what each test took).
set -eu
cd "$(dirname "$0")/.."
py=/usr/bin/python3
# gfortran: libopenmpi-dev pulls in gfortran-12 only, and mpifort calls plain `gfortran`
# (without it tests/test_profile_mpi_fortran.py would skip).
pkgs="openmpi-bin libopenmpi-dev python3-mpi4py python3-numpy python3-pytest python3-jsonschema
      python3-hypothesis python3-threadpoolctl gfortran"
missing=$(for p in $pkgs; do dpkg -s "$p" >/dev/null 2>&1 || echo "$p"; done)
if [ -n "$missing" ]; then
    if [ "${1:-}" = --if-installed ]; then
        echo "test-openmpi: needs Debian's $(echo $missing) (make test-openmpi installs them as root); skipped"
        exit 0
    elif [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
        # shellcheck disable=SC2086
        (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $missing >/dev/null) \
            || { echo "test-openmpi: could not install $(echo $missing); skipped"; exit 0; }
    else
        echo "test-openmpi: needs Debian's $(echo $missing); skipped"
        exit 0
    fi
fi
if [ "${1:-}" = --install-only ]; then echo "test-openmpi: the packages are installed"; exit 0; fi
if ! "$py" -c "from mpi4py import MPI; assert 'Open MPI' in MPI.Get_library_version()" 2>/dev/null; then
    echo "test-openmpi: $py's mpi4py does not load Open MPI (mpi-default-dev points elsewhere?); skipped"
    exit 0
fi
[ -f .venv/.installed ] || { echo "test-openmpi: run 'make test' first (it builds .venv)" >&2; exit 1; }
site=$(.venv/bin/python -c "import sysconfig; print(sysconfig.get_paths()['purelib'])")
lib=$(mktemp -d "${TMPDIR:-/tmp}/ceiling-ompi.XXXXXX")
trap 'rm -rf "$lib"' EXIT
# -p: the modules keep their times, so their compiled .pyc files stay valid (else every rank of
# every test compiles what it imports again: PYTHONDONTWRITEBYTECODE keeps it from being saved)
cp -rp "$site/ceiling" "$lib/"
# Open MPI refuses to start as root unless told.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
echo "test-openmpi: $("$py" -c "from mpi4py import MPI; import mpi4py; print('mpi4py', mpi4py.__version__, '-', MPI.Get_library_version().rstrip(chr(0)).splitlines()[0])")"
# Only the tests that start ranks (they use the mpi_setup fixture, tests/conftest.py): the
# rest of these files never touches the MPI library and ran in `make test` already.
PYTHONPATH="$lib" "$py" -m pytest -q -p no:cacheprovider ${OMPI_PYTEST_ARGS:-} --only-mpi-launched tests/test_bench_network.py tests/test_bench_storage_mpi.py tests/test_mpi_watchdog.py tests/test_cluster_mpi.py tests/test_profile_mpi.py tests/test_profile_mpi_fortran.py tests/test_trace_record_mpi.py tests/test_trace_wrapped_mpi.py \
    tests/test_trace_clocks_mpi.py tests/test_trace_waits_mpi.py tests/test_trace_otf2.py tests/test_profile_srun.py
