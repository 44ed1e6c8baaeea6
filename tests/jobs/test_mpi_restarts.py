"""An MPI job killed mid-run does not keep the next one from starting on the same machine.

A killed run followed by a new one is what a resume is. With Open MPI 4.1.4 and libfabric 1.17 (Debian 12's), a new
run's MPI_Init sometimes never returned: every rank waited for ever on a lock in the OFI components' memory monitor
(opal_common_ofi_export_memory_monitor), before it printed a line. kubetrain's environment contract turns OFI off
(kubetrain.contract.OPEN_MPI_ENV), and the jobs tier's environment carries it as the pods' does. Measured here with this
kill-then-start loop: without it, 3 of about 70 MPI starts hung (2 of them after a kill); with it, none of 130. At that
rate this test's 30 starts meet at least one hang on the old environment with a probability of about 0.7.

The runs start with mpirun, as the launcher's lib/mpi.sh starts them (`jobs.launch_command`), not horovodrun: the hang
is in MPI_Init, and horovodrun's own start (about 4 CPU seconds) made this test 5 times slower.
"""

from __future__ import annotations

from pathlib import Path

import pytest

pytestmark = pytest.mark.jobs

RESTARTS = 15
# Every rank initialises MPI, meets the others, says so (in one write: mpirun tags each write), then waits to be killed.
RUNNING = ("from mpi4py import MPI; import sys, time; MPI.COMM_WORLD.Barrier(); sys.stdout.write('up\\n'); "
           "sys.stdout.flush(); time.sleep(600)")
# Every rank initialises MPI and sums one per rank.
STARTED = "from mpi4py import MPI; import sys; sys.stdout.write(f'ranks={MPI.COMM_WORLD.allreduce(1)}\\n')"




def test_a_job_starts_every_time_after_the_one_before_it_was_killed(jobs, tmp_path: Path) -> None:
    marker = f"# {tmp_path}"  # in every rank's command line, so kill_when finds the ranks
    for attempt in range(RESTARTS):
        log = tmp_path / f"killed-{attempt}.log"
        running = jobs.start_job(jobs.launch_command("mpi", ["-c", f"{RUNNING} {marker}"]), tmp_path, log=log)
        jobs.kill_when(running, lambda log=log: log.read_text().count("up") == 2, marker, timeout=120, log=log)
        done = jobs.run_checked(jobs.launch_command("mpi", ["-c", STARTED]), tmp_path, timeout=60)
        assert done.stdout.count("ranks=2") == 2, (attempt, done.stdout)
