"""One syscall policy for both backends (issue 30, item 7).

The docker backend ran under the engine's default seccomp profile, where ``io_uring_setup`` and ``ptrace``
succeed, and both backends let a script open ``AF_VSOCK`` sockets (a virtual machine's channel to its host) and
other families a solution has no use for. Both now load wmrl's policy (:mod:`wmrl.autoresearch.environments.sandbox.seccomp`).
"""

from __future__ import annotations

import json
import platform
import struct

import pytest

from wmrl.autoresearch.environments.sandbox.base import ExecutionRequest, SandboxLimits

PROBE = r"""
import ctypes, socket
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long

def call(*args):
    result = libc.syscall(*args)
    return result, ctypes.get_errno()

NR = {"x86_64": {"io_uring_setup": 425, "ptrace": 101}, "aarch64": {"io_uring_setup": 425, "ptrace": 117}}[
    __import__("platform").machine()]
print("IO_URING_SETUP", *call(NR["io_uring_setup"], 8, ctypes.create_string_buffer(120)))
print("PTRACE_TRACEME", *call(NR["ptrace"], 0, 0, 0, 0))
for name, family, kind, proto in [("VSOCK", 40, socket.SOCK_STREAM, 0), ("ALG", 38, socket.SOCK_SEQPACKET, 0),
                                  ("PACKET", 17, socket.SOCK_RAW, 0), ("NETLINK_AUDIT", 16, socket.SOCK_RAW, 9),
                                  ("BLUETOOTH", 31, socket.SOCK_STREAM, 0)]:
    try:
        socket.socket(family, kind, proto).close()
        print(name, "OPENED")
    except OSError as exc:
        print(name, "DENIED", exc.errno)
# what honest scripts use keeps working
socket.socket(socket.AF_INET, socket.SOCK_STREAM).close()
socket.socket(socket.AF_INET6, socket.SOCK_DGRAM).close()
socket.socket(socket.AF_UNIX, socket.SOCK_STREAM).close()
socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, 0).close()
a, b = socket.socketpair()
socket.getaddrinfo("localhost", 80)
import multiprocessing
with multiprocessing.get_context("fork").Pool(2) as pool:
    assert pool.map(abs, [-1, -2]) == [1, 2]
import subprocess
assert subprocess.run(["true"]).returncode == 0
print("HONEST OK")
"""


def test_the_policy_holds_on_every_backend(sandbox):
    result = sandbox.run(ExecutionRequest(PROBE, limits=SandboxLimits(timeout_s=60, memory_mb=2048)))
    out = result.stdout_tail
    assert result.exit_code == 0 and "HONEST OK" in out, (result.infra_error, out, result.stderr_tail)
    assert "IO_URING_SETUP -1 1" in out and "PTRACE_TRACEME -1 1" in out, out  # EPERM
    for family in ("VSOCK", "ALG", "PACKET", "NETLINK_AUDIT", "BLUETOOTH"):
        assert f"{family} DENIED 97" in out, out  # EAFNOSUPPORT


FOREIGN_ABI = r"""
import ctypes, platform
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
print("BEFORE", flush=True)
libc.syscall(0x40000000 | 39)  # getpid through the x32 ABI
print("AFTER", ctypes.get_errno(), flush=True)
"""


@pytest.mark.skipif(platform.machine() != "x86_64", reason="the x32 ABI exists on x86_64 only")
def test_a_foreign_abi_call_kills_the_script_on_every_backend(sandbox):
    """One policy, one behaviour: the process sandbox returned EPERM where docker's engine killed the caller."""
    result = sandbox.run(ExecutionRequest(FOREIGN_ABI, limits=SandboxLimits(timeout_s=60, memory_mb=1024)))
    assert result.infra_error is None, result.infra_error
    assert "BEFORE" in result.stdout_tail and "AFTER" not in result.stdout_tail, result.stdout_tail
    assert result.exit_code == -31, (result.exit_code, result.stderr_tail)  # SIGSYS


def test_both_backends_describe_the_policy(sandbox):
    assert "seccomp" in sandbox.description


# -- the filter itself, run on a small BPF interpreter ---------------------------------------------------------------
def _run_filter(program: bytes, nr: int, args: tuple[int, ...] = (), arch: int | None = None) -> tuple[str, int]:
    """Evaluate a classic-BPF seccomp program on one call: (``allow``|``kill``|``errno``, errno)."""
    machine = platform.machine()
    arch = arch if arch is not None else {"x86_64": 0xC000003E, "aarch64": 0xC00000B7}[machine]
    words = {0: nr, 4: arch}
    for i, value in enumerate((*args, 0, 0, 0, 0, 0, 0)[:6]):
        words[16 + 8 * i] = value & 0xFFFFFFFF
    insns = [struct.unpack("=HBBI", program[i:i + 8]) for i in range(0, len(program), 8)]
    pc, acc = 0, 0
    while True:
        code, jt, jf, k = insns[pc]
        if code == 0x20:
            acc = words.get(k, 0)
        elif code == 0x06:
            return {0x7FFF0000: ("allow", 0), 0x80000000: ("kill", 0)}.get(k, ("errno", k & 0xFFFF))
        else:
            taken = {0x15: acc == k, 0x45: bool(acc & k), 0x35: acc >= k}[code]
            pc += jt if taken else jf
        pc += 1


@pytest.mark.skipif(platform.machine() not in ("x86_64", "aarch64"), reason="no filter for this architecture")
def test_the_bpf_program_decides_as_the_policy_says():
    from wmrl.autoresearch.environments.sandbox.seccomp import (
        AF_INET,
        AF_NETLINK,
        AF_UNIX,
        denied_syscalls,
        seccomp_program,
    )

    program = seccomp_program()
    socket_nr, pair_nr, clone_nr = {"x86_64": (41, 53, 56), "aarch64": (198, 199, 220)}[platform.machine()]
    for name, nr in denied_syscalls(platform.machine()).items():
        assert _run_filter(program, nr) == ("errno", 1), name
    assert _run_filter(program, socket_nr, (AF_INET, 1, 0)) == ("allow", 0)
    assert _run_filter(program, socket_nr, (AF_UNIX, 1, 0)) == ("allow", 0)
    assert _run_filter(program, socket_nr, (AF_NETLINK, 3, 0)) == ("allow", 0)
    assert _run_filter(program, socket_nr, (AF_NETLINK, 3, 9)) == ("errno", 97)
    assert _run_filter(program, socket_nr, (40, 1, 0)) == ("errno", 97)
    assert _run_filter(program, pair_nr, (AF_UNIX, 1, 0)) == ("allow", 0)
    assert _run_filter(program, pair_nr, (AF_INET, 1, 0)) == ("errno", 97)
    assert _run_filter(program, clone_nr, (0x01200011,)) == ("allow", 0)  # fork's flags
    assert _run_filter(program, clone_nr, (0x10000000 | 17,)) == ("errno", 1)  # CLONE_NEWUSER
    assert _run_filter(program, 435) == ("errno", 38)  # clone3: ENOSYS, the C library falls back to clone
    assert _run_filter(program, 0) == ("allow", 0)  # read
    foreign = {"x86_64": 0x40000003, "aarch64": 0x40000028}[platform.machine()]  # AUDIT_ARCH_I386, AUDIT_ARCH_ARM
    assert _run_filter(program, 0, arch=foreign) == ("kill", 0)  # a foreign ABI's call kills, as docker's engine does
    if platform.machine() == "x86_64":
        assert _run_filter(program, 0x40000000 | 39) == ("kill", 0)  # x32's getpid


@pytest.mark.skipif(platform.machine() not in ("x86_64", "aarch64"), reason="no profile for this architecture")
def test_the_docker_profile_carries_the_same_rules():
    from wmrl.autoresearch.environments.sandbox.seccomp import (
        AF_INET,
        AF_NETLINK,
        AF_UNIX,
        denied_syscalls,
        docker_profile,
    )

    profile = json.loads(docker_profile())
    assert profile["defaultAction"] == "SCMP_ACT_ALLOW"
    denied = set(profile["syscalls"][0]["names"])
    assert denied == set(denied_syscalls(platform.machine())) and profile["syscalls"][0]["errnoRet"] == 1
    socket_rules = [r for r in profile["syscalls"] if r["names"] == ["socket"]]
    families = {r["args"][0]["value"] for r in socket_rules if r["args"][0]["op"] == "SCMP_CMP_EQ" and len(r["args"]) == 1}
    assert 40 in families and 38 in families and not families & {AF_UNIX, AF_INET, 10, AF_NETLINK}
    assert any(r["names"] == ["clone3"] and r["errnoRet"] == 38 for r in profile["syscalls"])
