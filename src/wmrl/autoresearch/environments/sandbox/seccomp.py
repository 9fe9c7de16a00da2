"""wmrl's syscall policy, one policy for both backends: a classic-BPF program that bwrap loads for
:class:`~wmrl.autoresearch.environments.sandbox.process.ProcessSandbox` (``--seccomp FD``, assembled here with the standard
library, no libseccomp), and the same rules as a docker seccomp profile for
:class:`~wmrl.autoresearch.environments.sandbox.docker.DockerSandbox` (which otherwise runs under the engine's default profile,
where ``io_uring_setup`` and, on recent kernels, ``ptrace`` succeed).

What it denies, and why:

* state that outlives a run and reaches a later one: the kernel keyring (``add_key``, ``request_key``,
  ``keyctl``);
* new namespaces (``unshare``, ``setns``, ``clone`` with any ``CLONE_NEW*`` flag: no nested user namespace, the
  door to most privileged kernel code); ``clone3`` answers ``ENOSYS`` (its flags live in memory a filter cannot
  read), so the C library falls back to ``clone``, whose flags it can;
* reaching into other processes: ``ptrace``, ``process_vm_readv``/``writev``, ``kcmp``, ``pidfd_getfd``;
* kernel attack surface a solution has no use for: ``bpf``, ``perf_event_open``, ``userfaultfd``, io_uring (its
  requests bypass seccomp), ``fanotify_init``, ``open_by_handle_at``/``name_to_handle_at``, ``lookup_dcookie``,
  ``uselib``, ``iopl``/``ioperm``;
* the machine's configuration: mounts and the new mount API, ``pivot_root``, kernel modules, ``kexec``,
  ``reboot``, swap, ``acct``, quotas, the clock (``settimeofday``, ``clock_settime``, ``adjtimex``), ``syslog``,
  ``vhangup``;
* socket families other than ``AF_UNIX``, ``AF_INET``, ``AF_INET6`` and ``AF_NETLINK``'s routing protocol (which
  the C library's resolver reads): ``AF_VSOCK`` (a virtual machine's channel to its host), ``AF_ALG`` (kernel
  crypto), ``AF_PACKET``, ``AF_BLUETOOTH``, ``AF_RDS``, ``AF_TIPC``... fail with ``EAFNOSUPPORT``;
  ``socketpair`` accepts ``AF_UNIX`` only.

Denied calls fail with ``EPERM`` (a script sees an error it can handle, not a kill). A call of a foreign ABI (i386
on x86_64, x32; aarch32 on aarch64) kills the caller on both backends (``SIGSYS``, exit -31): that is what the docker
engine's libseccomp does with an architecture its profile does not list, and no honest script makes such a call
(an ``EPERM`` there would only let a probe go on). Architectures other than x86_64 and aarch64 get no filter; the
caller logs it.
"""

from __future__ import annotations

import json
import platform
import struct

# Syscall numbers: asm/unistd_64.h (x86_64), asm-generic/unistd.h (aarch64). Absent on aarch64: iopl, ioperm, uselib.
_NUMBERS = {
    "x86_64": {
        "ptrace": 101, "syslog": 103, "uselib": 134, "vhangup": 153, "pivot_root": 155, "adjtimex": 159,
        "acct": 163, "settimeofday": 164, "mount": 165, "umount2": 166, "swapon": 167, "swapoff": 168,
        "reboot": 169, "iopl": 172, "ioperm": 173, "init_module": 175, "delete_module": 176, "quotactl": 179,
        "lookup_dcookie": 212, "clock_settime": 227, "kexec_load": 246, "add_key": 248, "request_key": 249,
        "keyctl": 250, "unshare": 272, "perf_event_open": 298, "fanotify_init": 300, "name_to_handle_at": 303,
        "open_by_handle_at": 304, "clock_adjtime": 305, "setns": 308, "process_vm_readv": 310,
        "process_vm_writev": 311, "kcmp": 312, "finit_module": 313, "kexec_file_load": 320, "bpf": 321,
        "userfaultfd": 323,
    },
    "aarch64": {
        "lookup_dcookie": 18, "umount2": 39, "mount": 40, "pivot_root": 41, "vhangup": 58, "quotactl": 60,
        "acct": 89, "unshare": 97, "kexec_load": 104, "init_module": 105, "delete_module": 106,
        "clock_settime": 112, "syslog": 116, "ptrace": 117, "reboot": 142, "settimeofday": 170, "adjtimex": 171,
        "add_key": 217, "request_key": 218, "keyctl": 219, "swapon": 224, "swapoff": 225, "perf_event_open": 241,
        "fanotify_init": 262, "name_to_handle_at": 264, "open_by_handle_at": 265, "clock_adjtime": 266,
        "setns": 268, "process_vm_readv": 270, "process_vm_writev": 271, "kcmp": 272, "finit_module": 273,
        "bpf": 280, "userfaultfd": 282, "kexec_file_load": 294,
    },
}
# Same numbers on both: io_uring (its requests bypass seccomp), the new mount API, pidfd_getfd, quotactl_fd.
_COMMON = {"io_uring_setup": 425, "io_uring_enter": 426, "io_uring_register": 427, "open_tree": 428,
           "move_mount": 429, "fsopen": 430, "fsconfig": 431, "fsmount": 432, "fspick": 433, "pidfd_getfd": 438,
           "mount_setattr": 442, "quotactl_fd": 443}
# (AUDIT_ARCH_*, clone, socket, socketpair, libseccomp's name of the architecture)
_ARCH = {"x86_64": (0xC000003E, 56, 41, 53, "SCMP_ARCH_X86_64"), "aarch64": (0xC00000B7, 220, 198, 199, "SCMP_ARCH_AARCH64")}
_CLONE3 = 435
_CLONE_NEW_FLAGS = (0x00020000, 0x02000000, 0x04000000, 0x08000000, 0x10000000, 0x20000000, 0x40000000)
_CLONE_NEW_NAMESPACES = sum(_CLONE_NEW_FLAGS)  # CLONE_NEWNS | NEWCGROUP | NEWUTS | NEWIPC | NEWUSER | NEWPID | NEWNET
AF_UNIX, AF_INET, AF_INET6, AF_NETLINK, AF_MAX = 1, 2, 10, 16, 46
SOCKET_FAMILIES = (AF_UNIX, AF_INET, AF_INET6)  # and AF_NETLINK with protocol NETLINK_ROUTE (0)
EPERM, ENOSYS, EAFNOSUPPORT = 1, 38, 97


def denied_syscalls(machine: str) -> dict[str, int]:
    """Name -> number of every syscall the policy denies outright on ``machine``."""
    return {**_NUMBERS[machine], **_COMMON}


def seccomp_program(machine: str | None = None) -> bytes | None:
    """The policy as the classic-BPF filter bwrap loads (``--seccomp FD``), or ``None`` on an unknown architecture."""
    machine = machine or platform.machine()
    if machine not in _ARCH:
        return None
    arch, clone, socket, socketpair, _ = _ARCH[machine]
    ld, jeq, jset, jge, ret = 0x20, 0x15, 0x45, 0x35, 0x06  # BPF_LD|W|ABS, BPF_JMP|JEQ|JSET|JGE|K, BPF_RET|K
    allow, kill = 0x7FFF0000, 0x80000000  # SECCOMP_RET_ALLOW, SECCOMP_RET_KILL_PROCESS

    def errno(code: int) -> int:
        return 0x00050000 | code  # SECCOMP_RET_ERRNO

    # seccomp_data: nr at 0, arch at 4, args[i] at 16 + 8 i (the low 32 bits on these little-endian machines)
    prog = [(ld, 0, 0, 4), (jeq, 1, 0, arch), (ret, 0, 0, kill), (ld, 0, 0, 0)]  # a foreign ABI: killed
    if machine == "x86_64":
        prog += [(jge, 0, 1, 0x40000000), (ret, 0, 0, kill)]  # the x32 ABI (x86_64's arch, the x32 bit set)
    for nr in sorted(denied_syscalls(machine).values()):
        prog += [(jeq, 0, 1, nr), (ret, 0, 0, errno(EPERM))]
    prog += [(jeq, 0, 1, _CLONE3), (ret, 0, 0, errno(ENOSYS))]
    # Each block below loads an argument and ends in returns, so a call it does not match skips it whole with the
    # syscall number still loaded.
    clone_rules = [(ld, 0, 0, 16), (jset, 0, 1, _CLONE_NEW_NAMESPACES), (ret, 0, 0, errno(EPERM)), (ret, 0, 0, allow)]
    prog += [(jeq, 0, len(clone_rules), clone), *clone_rules]
    # socket(family, type, protocol): the allowed families, AF_NETLINK with protocol 0 (NETLINK_ROUTE) only
    socket_rules = [(ld, 0, 0, 16)]
    for f in SOCKET_FAMILIES:
        socket_rules += [(jeq, 0, 1, f), (ret, 0, 0, allow)]
    socket_rules += [(jeq, 0, 3, AF_NETLINK), (ld, 0, 0, 32), (jeq, 0, 1, 0), (ret, 0, 0, allow)]
    socket_rules += [(ret, 0, 0, errno(EAFNOSUPPORT))]
    prog += [(jeq, 0, len(socket_rules), socket), *socket_rules]
    pair_rules = [(ld, 0, 0, 16), (jeq, 0, 1, AF_UNIX), (ret, 0, 0, allow), (ret, 0, 0, errno(EAFNOSUPPORT))]
    prog += [(jeq, 0, len(pair_rules), socketpair), *pair_rules]
    prog += [(ret, 0, 0, allow)]
    return b"".join(struct.pack("=HBBI", *insn) for insn in prog)


def docker_profile(machine: str | None = None) -> str | None:
    """The policy as a docker seccomp profile (the JSON ``security_opt=["seccomp=<profile>"]`` takes), or
    ``None`` on an unknown architecture. The profile lists only the native architecture, so the engine's libseccomp
    kills calls of a foreign ABI, as :func:`seccomp_program` does."""
    machine = machine or platform.machine()
    if machine not in _ARCH:
        return None
    *_, arch_name = _ARCH[machine]

    def rule(names: list[str], code: int, *args: dict) -> dict:
        out = {"names": names, "action": "SCMP_ACT_ERRNO", "errnoRet": code}
        if args:
            out["args"] = list(args)
        return out

    def arg(index: int, op: str, value: int, value_two: int = 0) -> dict:
        return {"index": index, "value": value, "valueTwo": value_two, "op": f"SCMP_CMP_{op}"}

    families = [f for f in range(AF_MAX) if f not in (*SOCKET_FAMILIES, AF_NETLINK)]
    syscalls = [rule(sorted(denied_syscalls(machine)), EPERM), rule(["clone3"], ENOSYS)]
    # One rule per flag: libseccomp compares an argument once per rule, and the rules of a call are OR-ed.
    syscalls += [rule(["clone"], EPERM, arg(0, "MASKED_EQ", flag, flag)) for flag in _CLONE_NEW_FLAGS]
    syscalls += [rule(["socket"], EAFNOSUPPORT, arg(0, "EQ", f)) for f in families]
    syscalls += [rule(["socket"], EAFNOSUPPORT, arg(0, "GE", AF_MAX))]
    syscalls += [rule(["socket"], EAFNOSUPPORT, arg(0, "EQ", AF_NETLINK), arg(2, "NE", 0))]
    syscalls += [rule(["socketpair"], EAFNOSUPPORT, arg(0, "NE", AF_UNIX))]
    profile = {"defaultAction": "SCMP_ACT_ALLOW", "architectures": [arch_name], "syscalls": syscalls}
    return json.dumps(profile, separators=(",", ":"))
