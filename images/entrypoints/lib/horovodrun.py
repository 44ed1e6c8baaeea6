"""horovodrun for an elastic kubetrain job, with a timeout on its own sockets (run by lib/launcher.sh).

Horovod 0.28.1's elastic driver tells rank 0 about host changes over a socket that has no timeout, and it holds its
host lock meanwhile. When rank 0's pod is gone, that connect waits until the kernel gives up (80 to 140 s measured in
tests/images/test_elastic.py), and the whole job waits with it. With a default timeout the driver gives up after
3 tries and goes on; the lost rank is handled as a failure, as usual.
Usage: python horovodrun.py <horovodrun's arguments>
"""

from __future__ import annotations

import socket
import sys

# One connect, send or receive on horovodrun's sockets. Each of them is one short exchange on the pod network: the
# notifications to rank 0, and the rendezvous server's requests from the ranks.
TIMEOUT_SECONDS = 5


def main() -> int:
    socket.setdefaulttimeout(TIMEOUT_SECONDS)
    from horovod.runner.launch import run_commandline

    sys.argv[0] = "horovodrun"
    run_commandline()
    return 0


if __name__ == "__main__":
    sys.exit(main())
