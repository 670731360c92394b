"""The seccomp program itself: its syscall numbers are the kernel's, and, read by a small
classic-BPF interpreter here, it decides as documented on both machines it knows — also on
the one these tests do not run on. (That the kernel enforces it is
``test_sandbox_containment.py``'s.)"""

from __future__ import annotations

import errno
import re
import struct
from pathlib import Path

import pytest

from harness_nb.sandbox.seccomp import MODE_ARGUMENT, OPEN_ARGUMENTS, REFUSED, SYSCALLS, filter_program

ALLOW, KILL = 0x7FFF0000, 0x80000000
EPERM, ENOSYS = 0x50000 | errno.EPERM, 0x50000 | errno.ENOSYS
ARCH = {"x86_64": 0xC000003E, "aarch64": 0xC00000B7}
NEWER_THAN_SOME_HEADERS = {"fchmodat2": 452}  # Linux 6.6, the same number on every machine
HEADERS = {
    "x86_64": Path("/usr/include/x86_64-linux-gnu/asm/unistd_64.h"),
    "aarch64": Path("/usr/include/asm-generic/unistd.h"),
}


def decide(program: bytes, nr: int, arch: int, *args: int) -> int:
    """What ``program`` returns for the call ``nr`` (classic BPF over ``struct seccomp_data``)."""
    data = struct.pack("<iIQ6Q", nr, arch, 0, *(list(args) + [0] * 6)[:6])
    ops = [struct.unpack("<HBBI", program[i : i + 8]) for i in range(0, len(program), 8)]
    pc, acc = 0, 0
    while True:
        code, jt, jf, k = ops[pc]
        if code == 0x20:  # ld [k]
            acc = struct.unpack_from("<I", data, k)[0]
            pc += 1
        elif code in (0x15, 0x35, 0x45):  # jeq, jge, jset
            taken = acc == k if code == 0x15 else acc >= k if code == 0x35 else bool(acc & k)
            pc += 1 + (jt if taken else jf)
        elif code == 0x06:  # ret
            return k
        else:
            raise AssertionError(f"unexpected instruction {code:#x}")


@pytest.mark.parametrize("machine", ["x86_64", "aarch64"])
def test_the_numbers_are_the_kernels(machine):
    header = HEADERS[machine]
    if not header.exists():
        pytest.skip(f"no {header} here")
    text = header.read_text()
    defined = {m.group(1): m.group(2) for m in re.finditer(r"#define (__NR3264_\w+|__NR_\w+)\s+(\w+)", text)}

    def number(name: str) -> int | None:
        value = defined.get(f"__NR_{name}")
        while value is not None and not value.isdigit():
            value = defined.get(value)
        return int(value) if value else None

    for name, nr in SYSCALLS[machine].items():
        assert number(name) == nr or (number(name) is None and NEWER_THAN_SOME_HEADERS.get(name) == nr), name
    named = (*REFUSED, *MODE_ARGUMENT, *OPEN_ARGUMENTS, "clone", "clone3", "openat2", "ioctl")
    missing = [n for n in named if n not in SYSCALLS[machine] and number(n) is not None]
    assert not missing, missing


@pytest.mark.parametrize("machine", ["x86_64", "aarch64"])
def test_the_program_decides_as_documented(machine):
    program = filter_program(machine)
    assert program is not None and len(program) % 8 == 0
    table, arch = SYSCALLS[machine], ARCH[machine]
    for name in REFUSED:
        if name in table:
            assert decide(program, table[name], arch) == EPERM, name
    read_nr = {"x86_64": 0, "aarch64": 63}[machine]
    assert decide(program, read_nr, arch) == ALLOW
    assert decide(program, table["clone3"], arch) == ENOSYS
    assert decide(program, table["openat2"], arch) == ENOSYS
    assert decide(program, table["clone"], arch, 0x01200011) == ALLOW  # what fork() passes
    assert decide(program, table["clone"], arch, 0x003D0F00) == ALLOW  # what pthread_create passes
    for flag in (0x20000, 0x02000000, 0x04000000, 0x08000000, 0x10000000, 0x20000000, 0x40000000):
        assert decide(program, table["clone"], arch, flag | 17) == EPERM, hex(flag)
    assert decide(program, table["ioctl"], arch, 0, 0x5412) == EPERM  # TIOCSTI
    assert decide(program, table["ioctl"], arch, 0, 0x541C) == EPERM  # TIOCLINUX
    assert decide(program, table["ioctl"], arch, 0, 0x5401) == ALLOW  # TCGETS
    for name, arg in MODE_ARGUMENT.items():
        if name in table:
            mode = [0] * 6
            for bits, expected in ((0o4755, EPERM), (0o2755, EPERM), (0o1777, ALLOW), (0o755, ALLOW)):
                mode[arg] = bits
                assert decide(program, table[name], arch, *mode) == expected, (name, oct(bits))
    for name, (flags, mode_arg) in OPEN_ARGUMENTS.items():
        if name in table:
            args = [0] * 6
            args[mode_arg] = 0o4755
            assert decide(program, table[name], arch, *args) == ALLOW  # not making a file: no mode
            args[flags] = 0o101  # O_CREAT | O_WRONLY
            assert decide(program, table[name], arch, *args) == EPERM, name
            args[flags] = 0o20200002  # O_TMPFILE | O_RDWR
            assert decide(program, table[name], arch, *args) == EPERM, name
            args[mode_arg] = 0o644
            assert decide(program, table[name], arch, *args) == ALLOW
    assert decide(program, read_nr, 0x40000003) == KILL  # i386
    if machine == "x86_64":
        assert decide(program, 0x40000000 | 39, arch) == KILL  # x32


def test_a_machine_without_a_table_gets_no_filter():
    assert filter_program("riscv64") is None
