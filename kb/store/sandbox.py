"""No network for the process that runs a user's query: a seccomp filter, set before the engine
starts.

The query check (kb/query/safety.py) refuses SERVICE in the text; this is the second wall, the
one that does not depend on any parser: the kernel answers EACCES to every IPv4/IPv6 socket the
process (and every thread it starts later) asks for, and to io_uring (which can open sockets
without the socket system call). Oxigraph's HTTP client then fails like an unreachable host, so
not one byte leaves the machine. Unix sockets and files still work.

Linux on x86-64 and AArch64 only; elsewhere `deny_network` returns False and says why, and the
textual check stands alone (docs/security.md).
"""

from __future__ import annotations

import ctypes
import errno
import platform
import struct

# linux/filter.h, linux/seccomp.h, linux/audit.h
_LD_W_ABS = 0x20
_JEQ_K = 0x15
_JGE_K = 0x35
_RET_K = 0x06
_RET_ALLOW = 0x7FFF0000
_RET_ERRNO = 0x00050000 | errno.EACCES
_PR_SET_NO_NEW_PRIVS = 38
_PR_SET_SECCOMP = 22
_SECCOMP_MODE_FILTER = 2
_AF_INET, _AF_INET6 = 2, 10
_X32_SYSCALL_BIT = 0x40000000

#: machine -> (AUDIT_ARCH, socket syscall number, io_uring_setup, has the x32 ABI)
_ARCHES = {
    "x86_64": (0xC000003E, 41, 425, True),
    "aarch64": (0xC00000B7, 198, 425, False),
}


def _program(arch: int, nr_socket: int, nr_io_uring: int, x32: bool) -> list[tuple[int, int, int, int]]:
    """The BPF program; jumps are (true, false) offsets to the next instructions."""
    allow, deny = "allow", "deny"
    prog: list = [
        (_LD_W_ABS, 0, 0, 4),  # seccomp_data.arch
        (_JEQ_K, 0, deny, arch),  # a foreign ABI (int 0x80 on x86-64): nothing of it is needed
        (_LD_W_ABS, 0, 0, 0),  # seccomp_data.nr
    ]
    if x32:
        prog.append((_JGE_K, deny, 0, _X32_SYSCALL_BIT))
    prog += [
        (_JEQ_K, deny, 0, nr_io_uring),
        (_JEQ_K, 0, allow, nr_socket),
        (_LD_W_ABS, 0, 0, 16),  # args[0] (low 32 bits): the address family
        (_JEQ_K, deny, 0, _AF_INET),
        (_JEQ_K, deny, allow, _AF_INET6),
    ]
    labels = {allow: len(prog), deny: len(prog) + 1}
    prog += [(_RET_K, 0, 0, _RET_ALLOW), (_RET_K, 0, 0, _RET_ERRNO)]
    out = []
    for i, (code, jt, jf, k) in enumerate(prog):
        jt = labels[jt] - i - 1 if isinstance(jt, str) else jt
        jf = labels[jf] - i - 1 if isinstance(jf, str) else jf
        out.append((code, jt, jf, k))
    return out


def deny_network() -> tuple[bool, str]:
    """Install the filter on the calling thread (and every thread it starts afterwards: call it
    before anything starts threads). Returns (installed, why not)."""
    if platform.system() != "Linux":
        return False, f"seccomp is Linux-only ({platform.system()})"
    spec = _ARCHES.get(platform.machine())
    if spec is None:
        return False, f"no seccomp filter for {platform.machine()}"
    prog = _program(*spec)
    filters = b"".join(struct.pack("HBBI", *ins) for ins in prog)
    buf = ctypes.create_string_buffer(filters, len(filters))

    class _Fprog(ctypes.Structure):
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]

    fprog = _Fprog(len(prog), ctypes.cast(buf, ctypes.c_void_p))
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong]
    # Without no_new_privs an unprivileged process may not install a filter.
    if libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        return False, f"prctl(NO_NEW_PRIVS) failed: {errno.errorcode.get(ctypes.get_errno(), '?')}"
    if libc.prctl(_PR_SET_SECCOMP, _SECCOMP_MODE_FILTER, ctypes.addressof(fprog), 0, 0) != 0:
        return False, f"prctl(SECCOMP) failed: {errno.errorcode.get(ctypes.get_errno(), '?')}"
    return True, ""
