"""What kubelet's readiness probe, the EndpointSlice controller and CoreDNS do for an elastic job's Ready-only headless
Service, in one small process for Docker: it probes each worker's sshd (TCP, every PERIOD seconds, as the worker pod's
readinessProbe does) and answers DNS queries for the Service's name with the IPs of the Ready workers, NXDOMAIN when
none is Ready. Docker's embedded DNS sends it every name it does not know itself (`docker run --dns <its IP>`).

Usage: python ready_dns.py SERVICE PORT PERIOD WORKER_NAME...
Logs one line per change: `ready <name> <ip> at <unix time>` or `not ready <name> at <unix time>`.
"""

from __future__ import annotations

import socket
import struct
import sys
import threading
import time
from collections.abc import Iterable, Mapping

TYPE_A = 1
CLASS_IN = 1
NXDOMAIN = 3


def question(packet: bytes) -> tuple[str, int, int]:
    """The queried name (lower case, no trailing dot), its type and where the question section ends."""
    offset, labels = 12, []
    while packet[offset]:
        length = packet[offset]
        labels.append(packet[offset + 1 : offset + 1 + length].decode("ascii").lower())
        offset += 1 + length
    qtype = struct.unpack("!H", packet[offset + 1 : offset + 3])[0]
    return ".".join(labels), qtype, offset + 5


def answer(packet: bytes, service: str, ready_ips: Iterable[str]) -> bytes:
    """The reply: A records of `ready_ips` for `service`; NXDOMAIN for another name or when none is Ready."""
    name, qtype, end = question(packet)
    ips = sorted(ready_ips) if name == service else []
    ident, flags = struct.unpack("!HH", packet[:4])
    records = ips if qtype == TYPE_A else []
    # QR, the query's opcode and RD, AA, RA; NXDOMAIN when the name has no address at all.
    reply_flags = 0x8000 | (flags & 0x7900) | 0x0400 | 0x0080 | (0 if ips else NXDOMAIN)
    header = struct.pack("!HHHHHH", ident, reply_flags, 1, len(records), 0, 0)
    body = b"".join(struct.pack("!HHHIH", 0xC00C, TYPE_A, CLASS_IN, 0, 4) + socket.inet_aton(ip) for ip in records)
    return header + packet[12:end] + body


def probe(name: str, port: int) -> str | None:
    """The worker's IP when its name resolves and its sshd accepts a TCP connection."""
    try:
        ip = socket.gethostbyname(name)
        with socket.create_connection((ip, port), timeout=1):
            return ip
    except OSError:
        return None


def probe_forever(names: list[str], port: int, period: float, ready: dict[str, str]) -> None:
    while True:
        for name in names:
            ip = probe(name, port)
            if ip != ready.get(name):
                if ip is None:
                    del ready[name]
                    print(f"not ready {name} at {time.time():.3f}", flush=True)
                else:
                    ready[name] = ip
                    print(f"ready {name} {ip} at {time.time():.3f}", flush=True)
        time.sleep(period)


def serve(service: str, ready: Mapping[str, str]) -> None:
    server = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    server.bind(("0.0.0.0", 53))
    print(f"serving {service} on udp/53", flush=True)
    while True:
        packet, client = server.recvfrom(512)
        try:
            server.sendto(answer(packet, service, list(ready.values())), client)
        except (IndexError, struct.error, UnicodeDecodeError):
            continue  # not a query we understand: no reply, as for a lost packet


def main(argv: list[str]) -> None:
    service, port, period, names = argv[0].lower(), int(argv[1]), float(argv[2]), argv[3:]
    ready: dict[str, str] = {}
    threading.Thread(target=probe_forever, args=(names, port, period, ready), daemon=True).start()
    serve(service, ready)


if __name__ == "__main__":
    main(sys.argv[1:])
