"""The Ray processes a test started, found and stopped without touching anyone else's: every
`luma runner join` of a test runs in a session of its own (start_new_session), Ray starts its
servers, agents and workers without leaving it, so "the test's Ray" is every process of those
sessions (never `ray stop`, which stops every Ray process of the user). Plus which TCP ports
they listen on, read from /proc (no psutil in the test extra)."""

from __future__ import annotations

import ipaddress
import os
import signal
import socket
import struct
import time

import pytest


class RayProcesses:
    """The sessions of the `ray start` commands a test ran."""

    def __init__(self) -> None:
        self.sessions: set[int] = set()

    def add(self, pid: int) -> None:
        """The PID of a process started with start_new_session=True (its session's ID)."""
        self.sessions.add(pid)

    def pids(self, sessions: set[int] | None = None) -> list[int]:
        want = self.sessions if sessions is None else sessions
        out = []
        for name in os.listdir("/proc"):
            if not name.isdigit() or int(name) == os.getpid():
                continue
            try:
                if os.getsid(int(name)) in want:
                    out.append(int(name))
            except OSError:
                pass
        return out

    def stop(self, sessions: set[int] | None = None, grace_s: float = 5.0) -> list[int]:
        """SIGTERM, then SIGKILL after `grace_s`, every process of these sessions (default: all
        of the test's); the PIDs signalled."""
        hit = self.pids(sessions)
        for sig in (signal.SIGTERM, signal.SIGKILL):
            for pid in self.pids(sessions):
                try:
                    os.kill(pid, sig)
                except OSError:
                    pass
            deadline = time.monotonic() + grace_s
            while sig == signal.SIGTERM and self.pids(sessions) and time.monotonic() < deadline:
                time.sleep(0.2)
        return hit


def _inodes(pid: int) -> set[int]:
    out = set()
    try:
        for fd in os.listdir(f"/proc/{pid}/fd"):
            try:
                target = os.readlink(f"/proc/{pid}/fd/{fd}")
            except OSError:
                continue
            if target.startswith("socket:["):
                out.add(int(target[8:-1]))
    except OSError:
        pass
    return out


def _address(hex_ip: str) -> str:
    raw = bytes.fromhex(hex_ip)
    if len(raw) == 4:
        return socket.inet_ntop(socket.AF_INET, struct.pack("<I", struct.unpack(">I", raw)[0]))
    words = struct.unpack("<4I", raw)
    return str(ipaddress.IPv6Address(struct.pack(">4I", *words)))


def listening(pids: list[int]) -> list[tuple[int, str, int]]:
    """(pid, address, port) of every TCP socket in LISTEN state these processes hold."""
    owner = {inode: pid for pid in pids for inode in _inodes(pid)}
    out = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = open(table).read().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            parts = line.split()
            if parts[3] != "0A" or int(parts[9]) not in owner:  # 0A: TCP_LISTEN
                continue
            ip, port = parts[1].split(":")
            out.append((owner[int(parts[9])], _address(ip), int(port, 16)))
    return out


def loopback(address: str) -> bool:
    """127.0.0.0/8, ::1, or an IPv4-mapped loopback (::ffff:127.0.0.1)."""
    ip = ipaddress.ip_address(address)
    mapped = getattr(ip, "ipv4_mapped", None)
    return (mapped or ip).is_loopback


@pytest.fixture(scope="module")
def ray_processes():
    """The module's Ray processes; every one of them stopped at the end of the module."""
    procs = RayProcesses()
    try:
        yield procs
    finally:
        procs.stop()


@pytest.fixture(scope="session")
def listening_ports():
    """`listening(pids)` and `loopback(address)`."""
    return listening, loopback
