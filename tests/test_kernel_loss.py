"""A run whose kernel dies on an external scheduler stops itself and can be continued from a new kernel.

The run's tasks belong to the client that launched them. When that client goes without stopping the
run, the scheduler forgets the tasks and frees their slots at once; the workers must then end too
(otherwise their threads would keep running in slots the scheduler hands to others), the trainer
after writing a checkpoint, and ``Run.resume(run_dir, client=...)`` continues from it.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from distributed import Client

from srl_lab import cluster as clusters
from srl_lab.system import checkpoints
from srl_lab.system.control import heartbeat_topic
from srl_lab.system.controller import Run
from runs import wait_for

KERNEL = """
import json, sys, time
import srl_lab
from srl_lab.config import ActorConfig, ExperimentConfig, TrainerConfig

config = ExperimentConfig(name="kernel-loss", actors=ActorConfig(workers=2, ring_size=1, envs_per_group=4,
                                                                 fragment_length=32),
                          trainer=TrainerConfig(batch_steps=256, checkpoint_every_versions=1000, checkpoint_every_s=0))
run = srl_lab.launch(config, client=sys.argv[1], run_dir=sys.argv[2])
while run.status()["version"] < 5:
    time.sleep(0.2)
print(json.dumps({"run_id": run.run_id, "version": run.status()["version"]}), flush=True)
time.sleep(3600)  # the kernel is killed here, its run still going
"""


def beats(client: Client, run_id: str) -> int:
    return len(client.get_events(heartbeat_topic(run_id)))


def test_a_run_stops_itself_when_its_kernel_dies_and_resumes_from_a_new_one(tmp_path):
    local = clusters.local(n_workers=4, dashboard_address=None)
    client = Client(local)
    run_dir = str(tmp_path / "run")
    kernel = subprocess.Popen([sys.executable, "-c", KERNEL, local.scheduler_address, run_dir],
                              stdout=subprocess.PIPE, text=True, cwd=os.path.dirname(__file__))
    try:
        launched = json.loads(kernel.stdout.readline())
        kernel.send_signal(signal.SIGKILL)  # no stop(), no goodbye: the client just vanishes
        kernel.wait(10)
        killed_at = time.time()

        # The scheduler frees the slots at once; every worker's heartbeats then end within seconds.
        wait_for(lambda: not any(launched["run_id"] in str(key) for keys in client.processing().values()
                                 for key in keys), 30, "the scheduler to let go of the run's tasks")
        count = -1

        def silent() -> bool:
            nonlocal count
            before, count = count, beats(client, launched["run_id"])
            time.sleep(3)  # workers beat every second while they run
            return before == count == beats(client, launched["run_id"])

        wait_for(silent, 60, "every worker of the orphaned run to end")
        assert time.time() - killed_at < 60
        saved = checkpoints.load_latest(checkpoints.folder(run_dir))
        assert saved is not None and saved[1]["version"] >= launched["version"], "no checkpoint at the exit"

        # A new kernel continues the run where the orphaned trainer checkpointed it.
        resumed = Run.resume(run_dir, client=client)
        try:
            wait_for(lambda: resumed.status()["version"] > saved[1]["version"], 120, "the resumed run to train")
        finally:
            result = resumed.stop()
        assert result["version"] > saved[1]["version"]
        assert json.loads(Path(run_dir, "config.json").read_text())["run_ids"][0] == launched["run_id"]
    finally:
        kernel.kill()
        client.close()
        local.close()
