"""SRL worker processes keep tensor memory on the heap, whatever malloc settings Dask's nanny gave them."""
from __future__ import annotations

import os
import subprocess
import sys

from srl_lab.system.control import keep_tensor_memory

FAULTS = """
import resource, torch
from srl_lab.system.control import keep_tensor_memory

def faults():  # page faults of 200 short-lived 1 MiB tensors, like the activations of a PPO update
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    for _ in range(200):
        torch.empty(256 * 1024).fill_(1.0)
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before

faults()
without = faults()
applied = keep_tensor_memory()
faults()
print(without, applied, faults())
"""


def test_tensors_stop_faulting_in_pages_under_dasks_malloc_trim_setting():
    env = dict(os.environ, MALLOC_TRIM_THRESHOLD_="65536")  # what distributed's nanny sets for workers
    out = subprocess.run([sys.executable, "-c", FAULTS], env=env, capture_output=True, text=True, timeout=120,
                         check=True).stdout.split()
    without, applied, with_fix = int(out[0]), out[1] == "True", int(out[2])
    assert applied
    assert without > 10_000, without  # every 1 MiB tensor was mapped afresh: 256 pages each
    assert with_fix < without / 20, (without, with_fix)


def test_limit_threads_applies_it_in_every_worker(dask_client):
    def in_worker() -> tuple[str | None, bool]:
        from srl_lab.system.control import limit_threads

        limit_threads()
        return os.environ.get("MALLOC_TRIM_THRESHOLD_"), keep_tensor_memory()

    trim, applied = dask_client.submit(in_worker, resources={"srl_slot": 1}, pure=False).result(timeout=60)
    assert trim is not None and applied  # the nanny's setting is there, and the override took
