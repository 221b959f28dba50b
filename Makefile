# make run   - build ceiling into .venv and run the main job (ceiling run)
# make test  - build ceiling with its test needs into .venv and run the tests (TEST_JOBS=auto: in parallel, one
#              worker per CPU, then the timing-sensitive ones alone)
# make bench - side-by-side comparisons with peer tools (benchmarks/README.md)
# make test-openmpi - the tests that start MPI ranks again under Debian's Open MPI and mpi4py (scripts/test-openmpi.sh)
# make site-mpi [MPICC=/usr/bin/mpicc.mpich] - the network measured with this node's own MPI
#   (ceiling bench network --site-mpi: mpi4py built against it once, in a cached environment)
VENV ?= .venv
SOURCES := $(shell find src csrc -type f -not -name '*.pyc' -not -path '*/__pycache__/*' -not -name '*.so') pyproject.toml CMakeLists.txt

.PHONY: run test test-all test-openmpi site-mpi bench clean

# The main job needs the tool alone; the tests add pytest, mpi4py and MPICH.
$(VENV)/.tool: $(SOURCES) scripts/bootstrap.sh
	CEILING_VENV=$(VENV) scripts/bootstrap.sh
	touch $@

$(VENV)/.installed: $(SOURCES) scripts/bootstrap.sh
	CEILING_VENV=$(VENV) scripts/bootstrap.sh --test
	touch $@ $(VENV)/.tool

run: $(VENV)/.tool
	$(VENV)/bin/ceiling run

# The tests in two passes (scripts/run-tests.sh says how): the parallel one over one pytest-xdist worker
# per CPU (TEST_JOBS=auto; a number, or 0 for one process), then those marked serial, with the MPI tests
# again under Debian's Open MPI beside them where it is installed. Plain `pytest` still runs everything
# in one process. The passes keep pytest's rewritten test modules in tests/__pycache__ even where
# PYTHONDONTWRITEBYTECODE is set: the second pass then collects the suite without rewriting it again
# (about 10 s of CPU).
TEST_JOBS ?= auto
test: export PYTHONDONTWRITEBYTECODE =
test: export TEST_JOBS := $(TEST_JOBS)
test: export VENV := $(VENV)
test: export PYTEST_ARGS := $(PYTEST_ARGS)
test: $(VENV)/.installed
	scripts/run-tests.sh

test-openmpi: $(VENV)/.installed
	scripts/test-openmpi.sh

site-mpi: $(VENV)/.tool
	$(VENV)/bin/ceiling bench network --site-mpi $(MPICC)

bench: $(VENV)/.installed
	$(VENV)/bin/python benchmarks/compare.py $(ARGS)

clean:
	rm -rf build $(VENV) src/ceiling/_core/*.so
