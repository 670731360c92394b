"""The seccomp filter sandboxed commands run under: a classic-BPF program, built here, that
bubblewrap loads (``--seccomp FD``) just before it runs the command.

The filter allows every system call except these, which fail with ``EPERM``:

- changing the file system tree: ``mount``, ``umount2``, ``pivot_root``, ``chroot`` and the
  new mount API (``open_tree``, ``move_mount``, ``fsopen``, ``fsmount``, ``mount_setattr``, …);
- namespaces: ``unshare``, ``setns``, and ``clone`` with any ``CLONE_NEW*`` flag;
- other processes' memory: ``ptrace``, ``process_vm_readv``/``writev``, ``pidfd_getfd``, …;
- kernel interfaces a command has no business with: keyrings, ``bpf``, ``perf_event_open``,
  ``userfaultfd``, io_uring (whose operations seccomp cannot see), modules, ``kexec``,
  ``reboot``, swap, clocks, ``syslog``, quotas, ``open_by_handle_at``;
- ``ioctl(TIOCSTI)`` and ``ioctl(TIOCLINUX)``, which type into a terminal;
- set-user-ID and set-group-ID bits: ``chmod`` and its kin, and ``open``/``creat``/
  ``mknod`` making a file, with ``S_ISUID`` or ``S_ISGID`` in the mode. As root the
  command owns the workdir through an idmapped mount, so a file it marks set-user-ID
  would be a set-user-ID *root* program on the machine, for anyone who can reach it.

``clone3`` fails with ``ENOSYS`` instead: its flags live in memory a filter cannot read, and
on ``ENOSYS`` the C library falls back to ``clone``, whose flags it can; so does
``openat2``, whose mode lies in memory too (the C library's ``open`` does not use it). A call made through
another ABI than the machine's own (32-bit ``int 0x80``, x32) kills the process: the numbers
above would mean other calls there.

Most of these fail anyway for a process without capabilities; the filter is the second wall,
and the one that holds where the first has a hole. The syscall numbers are the kernel's
(``asm/unistd_64.h`` for x86_64, ``asm-generic/unistd.h`` for aarch64; ``fchmodat2``, of
Linux 6.6, is newer than some headers and has the number every machine gives it); other
machines get no filter, and ``filter_program`` says so with ``None``.
"""

from __future__ import annotations

import errno
import functools
import os
import platform
import struct
from collections.abc import Mapping
from dataclasses import dataclass

__all__ = ["MODE_ARGUMENT", "OPEN_ARGUMENTS", "REFUSED", "SYSCALLS", "filter_program", "machine_arch"]

REFUSED: tuple[str, ...] = (
    # the file system tree
    "mount", "umount2", "pivot_root", "chroot", "open_tree", "move_mount",
    "fsopen", "fsconfig", "fsmount", "fspick", "mount_setattr",
    # namespaces (clone is checked by its flags, clone3 answers ENOSYS)
    "unshare", "setns",
    # other processes' memory
    "ptrace", "process_vm_readv", "process_vm_writev", "process_madvise", "pidfd_getfd", "kcmp",
    # keyrings, BPF, perf, io_uring, userfaultfd
    "keyctl", "add_key", "request_key", "bpf", "perf_event_open", "userfaultfd",
    "io_uring_setup", "io_uring_enter", "io_uring_register",
    # the machine itself
    "init_module", "finit_module", "delete_module", "kexec_load", "kexec_file_load", "reboot",
    "swapon", "swapoff", "acct", "settimeofday", "clock_settime", "clock_adjtime", "adjtimex",
    "syslog", "quotactl", "quotactl_fd", "nfsservctl", "lookup_dcookie", "vhangup",
    "iopl", "ioperm", "uselib", "_sysctl", "open_by_handle_at",
)  # fmt: skip
"""The system calls the filter refuses with ``EPERM`` (where the machine has them)."""

# Calls that set a file's mode: the argument holding the mode (in each, a 32-bit mode_t).
MODE_ARGUMENT: Mapping[str, int] = {
    "chmod": 1, "fchmod": 1, "fchmodat": 2, "fchmodat2": 2, "creat": 1, "mknod": 1, "mknodat": 2,
}  # fmt: skip
# Calls that make a file only with O_CREAT or O_TMPFILE in their flags: (flags, mode) arguments.
OPEN_ARGUMENTS: Mapping[str, tuple[int, int]] = {"open": (1, 2), "openat": (2, 3)}

# name -> number, from the kernel headers (x86_64: asm/unistd_64.h; aarch64: asm-generic/unistd.h)
SYSCALLS: Mapping[str, Mapping[str, int]] = {
    "x86_64": {
        "mount": 165, "umount2": 166, "pivot_root": 155, "chroot": 161, "open_tree": 428,
        "move_mount": 429, "fsopen": 430, "fsconfig": 431, "fsmount": 432, "fspick": 433,
        "mount_setattr": 442, "unshare": 272, "setns": 308, "clone": 56, "clone3": 435, "ioctl": 16,
        "ptrace": 101, "process_vm_readv": 310, "process_vm_writev": 311, "process_madvise": 440,
        "pidfd_getfd": 438, "kcmp": 312, "keyctl": 250, "add_key": 248, "request_key": 249,
        "bpf": 321, "perf_event_open": 298, "userfaultfd": 323, "io_uring_setup": 425,
        "io_uring_enter": 426, "io_uring_register": 427, "init_module": 175, "finit_module": 313,
        "delete_module": 176, "kexec_load": 246, "kexec_file_load": 320, "reboot": 169,
        "swapon": 167, "swapoff": 168, "acct": 163, "settimeofday": 164, "clock_settime": 227,
        "clock_adjtime": 305, "adjtimex": 159, "syslog": 103, "quotactl": 179, "quotactl_fd": 443,
        "nfsservctl": 180, "lookup_dcookie": 212, "vhangup": 153, "iopl": 172, "ioperm": 173,
        "uselib": 134, "_sysctl": 156, "open_by_handle_at": 304,
        "chmod": 90, "fchmod": 91, "fchmodat": 268, "fchmodat2": 452, "creat": 85, "mknod": 133,
        "mknodat": 259, "open": 2, "openat": 257, "openat2": 437,
    },
    "aarch64": {
        "mount": 40, "umount2": 39, "pivot_root": 41, "chroot": 51, "open_tree": 428,
        "move_mount": 429, "fsopen": 430, "fsconfig": 431, "fsmount": 432, "fspick": 433,
        "mount_setattr": 442, "unshare": 97, "setns": 268, "clone": 220, "clone3": 435, "ioctl": 29,
        "ptrace": 117, "process_vm_readv": 270, "process_vm_writev": 271, "process_madvise": 440,
        "pidfd_getfd": 438, "kcmp": 272, "keyctl": 219, "add_key": 217, "request_key": 218,
        "bpf": 280, "perf_event_open": 241, "userfaultfd": 282, "io_uring_setup": 425,
        "io_uring_enter": 426, "io_uring_register": 427, "init_module": 105, "finit_module": 273,
        "delete_module": 106, "kexec_load": 104, "kexec_file_load": 294, "reboot": 142,
        "swapon": 224, "swapoff": 225, "acct": 89, "settimeofday": 170, "clock_settime": 112,
        "clock_adjtime": 266, "adjtimex": 171, "syslog": 116, "quotactl": 60, "quotactl_fd": 443,
        "nfsservctl": 42, "lookup_dcookie": 18, "vhangup": 58, "open_by_handle_at": 265,
        "fchmod": 52, "fchmodat": 53, "fchmodat2": 452, "mknodat": 33, "openat": 56, "openat2": 437,
    },
}  # fmt: skip

# linux/audit.h: AUDIT_ARCH_* = EM_* | __AUDIT_ARCH_64BIT | __AUDIT_ARCH_LE
_AUDIT_ARCH = {"x86_64": 0xC000003E, "aarch64": 0xC00000B7}
_X32_SYSCALL_BIT = 0x40000000  # x86_64 only: the x32 ABI's calls carry it
_CLONE_NEW = 0x7E020000  # CLONE_NEWNS|NEWCGROUP|NEWUTS|NEWIPC|NEWUSER|NEWPID|NEWNET
_TERMINAL_IOCTLS = (0x5412, 0x541C)  # TIOCSTI, TIOCLINUX (asm-generic/ioctls.h, both machines)
_SET_ID = 0o6000  # S_ISUID | S_ISGID
_CREATES = 0o100 | 0o20000000  # O_CREAT | __O_TMPFILE (asm-generic/fcntl.h, both machines)

# linux/filter.h and linux/seccomp.h
_LD_ABS_W = 0x20  # BPF_LD | BPF_W | BPF_ABS
_JEQ = 0x15  # BPF_JMP | BPF_JEQ | BPF_K
_JGE = 0x35  # BPF_JMP | BPF_JGE | BPF_K
_JSET = 0x45  # BPF_JMP | BPF_JSET | BPF_K
_RET = 0x06  # BPF_RET | BPF_K
_ALLOW = 0x7FFF0000
_KILL_PROCESS = 0x80000000
_ERRNO = 0x00050000
# struct seccomp_data: int nr; u32 arch; u64 instruction_pointer; u64 args[6] (little-endian:
# an argument's low 32 bits come first)
_NR, _ARCH = 0, 4


def _arg_low(index: int) -> int:
    return 16 + 8 * index


@dataclass
class _Op:
    code: int
    k: int
    jt: str | int = 0  # a label, or 0: the next instruction
    jf: str | int = 0


def machine_arch() -> str:
    """The machine's name as the filter knows it (``x86_64``, ``aarch64``, or another)."""
    machine = platform.machine().lower()
    return {"amd64": "x86_64", "arm64": "aarch64"}.get(machine, machine)


@functools.cache
def filter_program(arch: str | None = None) -> bytes | None:
    """The filter as bubblewrap reads it (an array of ``struct sock_filter``), for ``arch``
    (default: this machine); ``None`` on a machine without a syscall table here."""
    arch = arch or machine_arch()
    table = SYSCALLS.get(arch)
    if table is None:
        return None
    ops: list[_Op] = [
        _Op(_LD_ABS_W, _ARCH),
        _Op(_JEQ, _AUDIT_ARCH[arch], jf="kill"),
        _Op(_LD_ABS_W, _NR),
    ]
    if arch == "x86_64":
        ops.append(_Op(_JGE, _X32_SYSCALL_BIT, jt="kill"))
    ops += [_Op(_JEQ, table[name], jt="eperm") for name in REFUSED if name in table]
    ops += [_Op(_JEQ, table[name], jt="enosys") for name in ("clone3", "openat2") if name in table]
    ops += [
        _Op(_JEQ, table["clone"], jt="clone"),
        _Op(_JEQ, table["ioctl"], jt="ioctl"),
        *(_Op(_JEQ, table[name], jt=f"mode{arg}") for name, arg in MODE_ARGUMENT.items() if name in table),
        *(_Op(_JEQ, table[name], jt=f"open{flags}") for name, (flags, _) in OPEN_ARGUMENTS.items() if name in table),
        _Op(_RET, _ALLOW),
    ]
    labels = {"clone": len(ops)}
    ops += [_Op(_LD_ABS_W, _arg_low(0)), _Op(_JSET, _CLONE_NEW, jt="eperm"), _Op(_RET, _ALLOW)]
    labels["ioctl"] = len(ops)
    ops.append(_Op(_LD_ABS_W, _arg_low(1)))
    ops += [_Op(_JEQ, request, jt="eperm") for request in _TERMINAL_IOCTLS]
    ops.append(_Op(_RET, _ALLOW))
    for flags, mode in sorted(set(OPEN_ARGUMENTS.values())):
        labels[f"open{flags}"] = len(ops)  # creating? then the mode is checked like chmod's
        ops += [_Op(_LD_ABS_W, _arg_low(flags)), _Op(_JSET, _CREATES, jt=f"mode{mode}"), _Op(_RET, _ALLOW)]
    for arg in sorted(set(MODE_ARGUMENT.values()) | {mode for _, mode in OPEN_ARGUMENTS.values()}):
        labels[f"mode{arg}"] = len(ops)
        ops += [_Op(_LD_ABS_W, _arg_low(arg)), _Op(_JSET, _SET_ID, jt="eperm"), _Op(_RET, _ALLOW)]
    for label, action in (("eperm", _ERRNO | errno.EPERM), ("enosys", _ERRNO | errno.ENOSYS), ("kill", _KILL_PROCESS)):
        labels[label] = len(ops)
        ops.append(_Op(_RET, action))
    return b"".join(_encode(op, at, labels) for at, op in enumerate(ops))


def _encode(op: _Op, at: int, labels: Mapping[str, int]) -> bytes:
    """One ``struct sock_filter``: jump targets become offsets from the next instruction."""

    def offset(target: str | int) -> int:
        if isinstance(target, int):
            return target
        jump = labels[target] - at - 1
        if not 0 <= jump <= 255:
            raise ValueError(f"seccomp jump to {target} out of range ({jump})")
        return jump

    return struct.pack("<HBBI", op.code, offset(op.jt), offset(op.jf), op.k)


def filter_fd(program: bytes) -> int:
    """A file descriptor bubblewrap can read ``program`` from (``--seccomp FD``); the caller
    closes it."""
    fd = os.memfd_create("harness_nb-seccomp", os.MFD_CLOEXEC)
    try:
        os.write(fd, program)
        os.lseek(fd, 0, os.SEEK_SET)
    except BaseException:
        os.close(fd)
        raise
    return fd
