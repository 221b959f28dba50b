# make run   - build ceiling into .venv and run the main job (ceiling run)
# make test  - build ceiling with its test needs into .venv and run the tests
# make bench - side-by-side comparisons with peer tools (benchmarks/README.md)
# make test-openmpi - the MPI tests again under Debian's Open MPI and mpi4py (scripts/test-openmpi.sh)
VENV ?= .venv
SOURCES := $(shell find src csrc -type f -not -name '*.pyc' -not -path '*/__pycache__/*' -not -name '*.so') pyproject.toml CMakeLists.txt

.PHONY: run test test-all test-openmpi bench clean

# The main job needs the tool alone; the tests add pytest, mpi4py and MPICH.
$(VENV)/.tool: $(SOURCES) scripts/bootstrap.sh
	CEILING_VENV=$(VENV) scripts/bootstrap.sh
	touch $@

$(VENV)/.installed: $(SOURCES) scripts/bootstrap.sh
	CEILING_VENV=$(VENV) scripts/bootstrap.sh --test
	touch $@ $(VENV)/.tool

run: $(VENV)/.tool
	$(VENV)/bin/ceiling run

test: $(VENV)/.installed
	$(VENV)/bin/python -m pytest -q

test-openmpi: $(VENV)/.installed
	scripts/test-openmpi.sh

bench: $(VENV)/.installed
	$(VENV)/bin/python benchmarks/compare.py $(ARGS)

clean:
	rm -rf build $(VENV) src/ceiling/_core/*.so
