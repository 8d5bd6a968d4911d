# Two commands do all set-up on a fresh machine: `make demo` and `make test`.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
COMPILED := $(VENV)/.compiled

.PHONY: demo test bench bench-long lab chromium kernels clean

$(STAMP): pyproject.toml constraints.txt
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --no-compile -c constraints.txt -e '.[dev,mujoco,lab,cluster]'
	touch $(STAMP)

# Bytecode for everything installed and for srl_lab, on every core and beside the kernels' compile
# (pip compiles on one core, and not an editable install at all): where bytecode is not written on
# import, every process would otherwise compile all it imports again. A file that does not compile
# (test data in some packages) is skipped, as pip skips it.
$(COMPILED): $(STAMP)
	$(PY) -m compileall -q -j 0 $(VENV)/lib srl_lab > /dev/null || true
	touch $(COMPILED)

# The showcase: hide-and-seek on the embedded cluster for MINUTES (`make demo MINUTES=30` for longer);
# `python -m srl_lab.demo` is the one-minute CartPole check.
MINUTES ?= 3
demo: kernels $(COMPILED)
	$(PY) recipes/hide_and_seek.py --minutes $(MINUTES)

# chromium's install beside the Python install, then the kernels' compile beside the bytecode's.
test:
	$(MAKE) --no-print-directory -j2 chromium kernels $(COMPILED)
	$(VENV)/bin/pytest -q -ra --durations=40

bench: $(COMPILED)
	$(MAKE) --no-print-directory chromium
	$(PY) benchmarks/cartpole_throughput.py
	$(PY) benchmarks/hide_and_seek_env.py
	$(PY) benchmarks/hide_and_seek_throughput.py
	$(PY) benchmarks/pendulum.py
	$(PY) benchmarks/scaling.py
	$(PY) benchmarks/viewer_overhead.py
	$(PY) benchmarks/notebook_overhead.py

# Long runs, not in CI: 30 minutes of hide-and-seek self-play learning; ~8 minutes of updates with the
# actors 0-12 versions behind; 10 minutes of fault injection.
bench-long: $(COMPILED)
	$(PY) benchmarks/hide_and_seek_learning.py
	$(PY) benchmarks/hide_and_seek_policy_lag.py
	$(PY) benchmarks/soak.py

lab: kernels $(COMPILED)
	$(VENV)/bin/jupyter lab notebooks

# The lite env's numba kernels into their on-disk cache: ~30 s once, then ~1 s (hide_and_seek/warm.py).
kernels: $(STAMP)
	$(PY) -m srl_lab.envs.hide_and_seek.warm

# Debian's chromium drives the JupyterLab UI test (skipped, saying why, without it) and the notebook benchmark.
chromium:
	@command -v chromium >/dev/null 2>&1 || (apt-get install -y -qq chromium >/dev/null 2>&1 \
		|| (apt-get update -qq >/dev/null 2>&1 && apt-get install -y -qq chromium >/dev/null 2>&1)) \
		|| echo "chromium could not be installed: the JupyterLab UI test will be skipped, the notebook benchmark will stop"

clean:
	rm -rf $(VENV) runs .pytest_cache .hypothesis
