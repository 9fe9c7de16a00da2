"""The seccomp filter of :class:`~wmrl.environments.sandbox.process.ProcessSandbox`: a classic-BPF program,
assembled here with the standard library (no libseccomp), that bwrap loads with ``--seccomp FD``."""

from __future__ import annotations

import platform
import struct

_SECCOMP_DENIED = {  # syscall numbers: asm/unistd_64.h (x86_64), asm-generic/unistd.h (aarch64)
    "x86_64": {
        "ptrace": 101, "pivot_root": 155, "mount": 165, "umount2": 166, "init_module": 175, "delete_module": 176,
        "kexec_load": 246, "add_key": 248, "request_key": 249, "keyctl": 250, "unshare": 272,
        "perf_event_open": 298, "setns": 308, "finit_module": 313, "kexec_file_load": 320, "bpf": 321,
        "userfaultfd": 323,
    },
    "aarch64": {
        "umount2": 39, "mount": 40, "pivot_root": 41, "unshare": 97, "kexec_load": 104, "init_module": 105,
        "delete_module": 106, "ptrace": 117, "add_key": 217, "request_key": 218, "keyctl": 219,
        "perf_event_open": 241, "setns": 268, "finit_module": 273, "bpf": 280, "userfaultfd": 282,
        "kexec_file_load": 294,
    },
}
# Same numbers on both: io_uring_setup/enter/register (its requests bypass seccomp) and the new mount API.
_SECCOMP_DENIED_COMMON = {"io_uring_setup": 425, "io_uring_enter": 426, "io_uring_register": 427,
                          "open_tree": 428, "move_mount": 429, "fsopen": 430, "fsconfig": 431, "fsmount": 432,
                          "fspick": 433}
_SECCOMP_ARCH = {"x86_64": (0xC000003E, 56), "aarch64": (0xC00000B7, 220)}  # AUDIT_ARCH_*, clone
_CLONE3 = 435
_CLONE_NEW_NAMESPACES = 0x7E020000  # CLONE_NEWNS | NEWCGROUP | NEWUTS | NEWIPC | NEWUSER | NEWPID | NEWNET


def seccomp_program(machine: str | None = None) -> bytes | None:
    """The classic-BPF seccomp filter bwrap loads (``--seccomp FD``), or ``None`` on an unknown architecture.

    Denied with ``EPERM``: the kernel keyring (``add_key``, ``request_key``, ``keyctl``: a key stored by one
    run would be read by a later one), namespaces (``unshare``, ``setns``, ``clone`` with any ``CLONE_NEW*``
    flag: no nested user namespace), ``ptrace``, ``bpf``, ``perf_event_open``, ``userfaultfd``, ``io_uring``,
    mounts and kernel modules. ``clone3`` answers ``ENOSYS`` (its flags live in memory a filter cannot read),
    so the C library falls back to ``clone``, whose flags it can. Calls of a foreign ABI (i386 on x86_64,
    x32) are denied whole. Other architectures get no filter (the caller logs it): the remaining layers
    still apply, only these syscalls stay open.
    """
    machine = machine or platform.machine()
    if machine not in _SECCOMP_ARCH:
        return None
    arch, clone = _SECCOMP_ARCH[machine]
    ld, jeq, jset, jge, ret = 0x20, 0x15, 0x45, 0x35, 0x06  # BPF_LD|W|ABS, BPF_JMP|JEQ|JSET|JGE|K, BPF_RET|K
    allow, eperm, enosys = 0x7FFF0000, 0x00050000 | 1, 0x00050000 | 38  # SECCOMP_RET_ALLOW / ERRNO(EPERM|ENOSYS)
    prog = [(ld, 0, 0, 4), (jeq, 1, 0, arch), (ret, 0, 0, eperm), (ld, 0, 0, 0)]  # seccomp_data.arch, .nr
    if machine == "x86_64":
        prog += [(jge, 0, 1, 0x40000000), (ret, 0, 0, eperm)]  # the x32 ABI
    for nr in sorted({**_SECCOMP_DENIED[machine], **_SECCOMP_DENIED_COMMON}.values()):
        prog += [(jeq, 0, 1, nr), (ret, 0, 0, eperm)]
    prog += [(jeq, 0, 1, _CLONE3), (ret, 0, 0, enosys)]
    prog += [(jeq, 0, 3, clone), (ld, 0, 0, 16), (jset, 0, 1, _CLONE_NEW_NAMESPACES), (ret, 0, 0, eperm)]
    prog += [(ret, 0, 0, allow)]
    return b"".join(struct.pack("=HBBI", *insn) for insn in prog)
