"""A run that hangs fails its test with what a developer needs to find why: each rank's last lines and the stack of
every process of the run still alive, and no process of it is left behind."""

from __future__ import annotations

import psutil
import pytest

pytestmark = pytest.mark.jobs

# Rank 0 finishes; rank 1 prints a line, then waits in a function of its own name for ever.
PROGRAM = """
import os, sys, time
rank = os.environ.get("OMPI_COMM_WORLD_RANK") or os.environ.get("HOROVOD_RANK")
print(f"rank {rank} is up", flush=True)
print(f"rank {rank} warns", file=sys.stderr, flush=True)
def wait_for_a_message_that_never_comes():
    time.sleep(3600)
if rank == "1":
    wait_for_a_message_that_never_comes()
"""


@pytest.mark.parametrize("controller", ["gloo", "mpi"])
def test_a_hung_run_fails_with_each_ranks_lines_and_every_live_process_stack(jobs, tmp_path, controller):
    command = jobs.launch_command(controller, ["-c", PROGRAM])
    with pytest.raises(AssertionError) as failure:
        jobs.run_checked(command, tmp_path, timeout=20)
    message = str(failure.value)
    assert message.startswith("timed out after 20s: ")
    for rank in ("0", "1"):
        assert f"== rank {rank}, last 1 of 1 lines:" in message and f"rank {rank} is up" in message
        assert f"rank {rank} warns" in message
    assert "wait_for_a_message_that_never_comes" in message, message
    assert "(sleeping)" in message or "(idle)" in message, message
    leftovers = [process for process in psutil.process_iter(["cmdline"])
                 if "wait_for_a_message_that_never_comes" in " ".join(process.info["cmdline"] or [])]
    assert not leftovers, leftovers
