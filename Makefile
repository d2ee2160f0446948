# Set-up and the two everyday jobs. Needs Python >= 3.11 with its headers (python3-dev), make and a C
# compiler: the install is -e '.[test,mpi]', and the test extra's pesq is built from source (docs/metrics.md).
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
DEMO   := build/demo

.PHONY: install demo test test-all clean

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[test,mpi]'
	touch $@

install: $(VENV)/.installed

# Build a small noisy corpus, enhance one file, score input against output.
demo: install
	$(BIN)/sepsti corpus synth $(DEMO)/corpus --seed 0 --overwrite
	$(BIN)/sepsti enhance $(DEMO)/corpus/noisy/babble_5dB/sp21_babble_sn5.wav -o $(DEMO)/sp21_enhanced.wav --overwrite
	$(BIN)/sepsti evaluate --corpus $(DEMO)/corpus --noise babble --snr 5 --json $(DEMO)/evaluate.json --plot $(DEMO)/evaluate.png --overwrite

# The fast suite on every core (pytest-xdist); each test's seeds are its own, so the split does not matter.
test: install
	$(BIN)/python -m pytest -q -n auto

# Everything, the slow statistical tests and the MPI tests included.
test-all: install
	$(BIN)/python -m pytest -q -m ''

# numba's cache (cache=True) is checked against the file that defines a kernel only, not the modules it inlines
# (ziggurat.py, _kernels.py): after editing those, `make clean` drops the compiled kernels with the rest.
clean:
	rm -rf $(VENV) build .pytest_cache
	find core sepsti -name '*.nbi' -delete -o -name '*.nbc' -delete
