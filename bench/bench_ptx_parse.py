"""Benchmark: loading PTX text is linear in its length: ``refsim.ptx.parse.parse`` and
``refsim.ptx.Module`` (parse, the dispatch-table check, the one-of-each-form build check) on 10^4 and
10^5 instructions, and the ratio (10 when linear).

Texts: ``uniform`` is one instruction repeated (the fuzz's case: ``add.s32 %r1, %r1, 1;``), ``mixed``
a nvcc-like rotation of an add with an immediate, a ``ld.global`` with a register base and offset and a
guarded ``mul``, over 100 registers (few statements repeat). Target: 10^5 instructions in about 1 s.
Printed: per text and function the best wall and CPU seconds of ``--repeats`` calls, microseconds per
instruction, and the ratio of the two sizes' CPU times; ``uptime`` before and after (the machine is
shared). Nothing is asserted.

Napkin math: a statement costs a line split and strip, one regex for the opcode and guard, a split
at commas, a scope lookup or a cached literal per operand and one Instruction: ~5-10 us in CPython,
so 10^5 instructions take ~0.5-1 s; the Module adds ~2 us per instruction (handler lookup and form key)
and builds one step function per distinct form. Python's cyclic collector is paused while loading
(refsim.ptx.parse.collector_paused): its passes over the growing heap made the load superlinear.

Run: python bench/bench_ptx_parse.py [--repeats 3]
"""

from __future__ import annotations

import argparse
import subprocess

from _timing import repeat_timed  # bench/_timing.py (scripts run as python bench/NAME.py)

HEAD = (".version 8.0\n.target sm_80\n.address_size 64\n.visible .entry k()\n{\n"
        ".reg .b32 %r<200>;\n.reg .pred %p<4>;\n.reg .b64 %rd<9>;\n")


def uniform(n: int) -> str:
    return HEAD + "add.s32 %r1, %r1, 1;\n" * n + "}\n"


def mixed(n: int) -> str:
    rows = []
    for i in range(n):
        j = i // 3
        rows.append((f"add.s32 %r{j % 100}, %r{j * 7 % 100}, {j % 1000};",
                     f"ld.global.u32 %r{j % 50}, [%rd{j % 8}+{4 * (j % 64)}];",
                     f"@%p1 mul.lo.s32 %r{j % 99}, %r3, %r4;")[i % 3])
    return HEAD + "\n".join(rows) + "\n}\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    from refsim import ptx
    from refsim.ptx.parse import parse

    print(subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip())
    for text_name, make in (("uniform", uniform), ("mixed", mixed)):
        texts = {n: make(n) for n in (10**4, 10**5)}
        for fn_name, fn in (("parse", parse), ("Module", ptx.Module)):
            cpu = {}
            for n, text in texts.items():
                t = repeat_timed(lambda: fn(text), args.repeats)
                cpu[n] = min(t.cpus)
                print(f"{text_name:8s} {fn_name:7s} {n:>7,} instructions  wall {min(t.walls):6.3f} s  "
                      f"cpu {cpu[n]:6.3f} s  {cpu[n] / n * 1e6:5.1f} us/instruction")
            print(f"{text_name:8s} {fn_name:7s} ratio 10^5 / 10^4 (cpu): {cpu[10**5] / cpu[10**4]:5.1f}  (linear: 10)")
    print(subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip())


if __name__ == "__main__":
    main()
