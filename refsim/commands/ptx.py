"""``refsim ptx stats FILE.cu|FILE.ptx --arch sm_80``: static instruction mix and registers per kernel.
``refsim ptx check FILE.cu --kernel ENTRY --launch MOD:FN --fmt marlin``: the same check as
``refsim check FILE.cu:ENTRY --launch MOD:FN`` (:mod:`refsim.commands.check`), the kernel run through
:mod:`refsim.ptx` and compared bit for bit with refsim's emulator of the format.

For a ``.cu`` file the PTX comes from :func:`refsim.ptx.compile` (needs nvcc); registers, spills and
shared memory come from ``ptxas -v`` when ptxas is installed (beside nvcc or on PATH), otherwise
the column says ``n/a``. Each kernel says whether :class:`refsim.ptx.Module` can run it, or names the
first instruction it refuses. ``--sass`` lists what ptxas generates for each kernel
(:mod:`refsim.ptx.sass`; needs ptxas and nvdisasm, else one error line and exit 2).
"""

from __future__ import annotations

import re
import shutil
import subprocess
import tempfile
from pathlib import Path

from refsim.commands import check as _check_command
from refsim.errors import FormatRuleError, ToolchainError


def register(subparsers) -> None:
    p = subparsers.add_parser("ptx", help="inspect PTX kernels (`refsim ptx stats FILE.cu|FILE.ptx`)",
                              description="Tools around refsim.ptx, the CPU executor of nvcc's PTX.")
    sub = p.add_subparsers(dest="ptx_command", metavar="COMMAND")
    s = sub.add_parser("stats", help="static instruction mix and registers per kernel",
                       description="Per-kernel static instruction mix (by opcode) and ptxas register use.")
    s.add_argument("file", help="a CUDA source (.cu) or PTX (.ptx) file")
    s.add_argument("--arch", default="sm_80", help="target architecture (default sm_80)")
    s.add_argument("--full", action="store_true", help="count full instruction names, not base opcodes")
    s.add_argument("--option", action="append", default=[], help="extra nvcc option for .cu files (repeatable)")
    s.add_argument("--sass", action="store_true",
                   help="also list each kernel's SASS as ptxas generates it for --arch (needs ptxas and nvdisasm: "
                        "pip install \"refsim[cuda]\")")
    s.set_defaults(func=stats_command)
    c = sub.add_parser("check", help="check a .cu/.ptx kernel bit for bit against refsim's emulator",
                       description="Compile FILE, run its entry KERNEL through refsim.ptx as the --launch function "
                                   "describes, and compare with refsim's emulator of --fmt (see `refsim check`).")
    c.add_argument("file", help="a CUDA source (.cu) or PTX (.ptx) file")
    c.add_argument("--kernel", required=True, help="the .entry to run (extern \"C\" name, mangled name or a unique part)")
    _check_command.add_check_options(c, launch_required=True)
    c.set_defaults(func=check_command)
    p.set_defaults(func=lambda args: (p.print_help(), 2)[1])


def _ptxas_usage(text: str, arch: str) -> dict[str, str]:
    """kernel name -> ptxas -v summary ("Used 18 registers, ..."); {} when ptxas is unavailable."""
    from refsim.ptx.toolchain import find_nvcc

    try:
        ptxas = find_nvcc().parent / "ptxas"
    except ToolchainError:
        ptxas = None
    if ptxas is None or not ptxas.is_file():
        found = shutil.which("ptxas")
        if not found:
            return {}
        ptxas = Path(found)
    with tempfile.TemporaryDirectory(prefix="refsim-ptxas-") as tmp:
        src = Path(tmp) / "k.ptx"
        src.write_text(text)
        res = subprocess.run([str(ptxas), f"-arch={arch}", "-v", str(src), "-o", str(Path(tmp) / "k.cubin")],
                             capture_output=True, text=True, timeout=600)
    if res.returncode != 0:
        raise ToolchainError(f"ptxas failed:\n{res.stderr.strip()}")
    usage, current = {}, None
    for line in res.stderr.splitlines():
        m = re.search(r"Compiling entry function '([^']+)'", line)
        if m:
            current = m.group(1)
        m = re.search(r"(Used \d+ registers.*)", line)
        if m and current:
            usage[current] = m.group(1)
    return usage


def stats_text(text: str, arch: str, full: bool = False, sass: bool = False) -> str:
    """The report of ``refsim ptx stats`` for PTX ``text`` (with ``sass``: each kernel's SASS listing)."""
    from refsim import ptx
    from refsim.ptx import sass as sass_mod
    from refsim.ptx.parse import parse

    parsed = parse(text)
    listings = sass_mod.sass(text, arch) if sass else {}
    usage = _ptxas_usage(text, arch)
    module = ptx.Module(text)
    refused = module.unsupported
    runnable = "yes" if not refused else f"{len(parsed.kernels) - len(refused)} of {len(parsed.kernels)} kernels"
    out = []
    for name, k in parsed.kernels.items():
        mix: dict[str, int] = {}
        for ins in k.instructions[:-1]:          # the last one is the implicit closing ret
            key = ins.name if full else ins.opcode
            mix[key] = mix.get(key, 0) + 1
        total = sum(mix.values())
        out.append(f"kernel {name}: {total} static instructions, {len(k.params)} parameters, "
                   f"{k.shared_bytes} bytes static shared memory")
        out.append(f"  ptxas ({arch}): {usage.get(name, 'n/a (ptxas not found)')}")
        out.append(f"  refsim.ptx runs it: {'no: ' + refused[name] if name in refused else 'yes'}")
        if name not in refused:
            pairs = module.contractible(name)
            lines = ", ".join(f"{a}+{b}" for a, b in pairs[:6]) + (" ..." if len(pairs) > 6 else "")
            out.append(f"  contractible mul+add pairs (ptxas may fuse; see docs/ptx.md): {len(pairs)}"
                       + (f" at PTX lines {lines}" if pairs else ""))
        width = max((len(x) for x in mix), default=0)
        for op, n in sorted(mix.items(), key=lambda kv: (-kv[1], kv[0])):
            out.append(f"  {op:<{width}}  {n:6d}  {100.0 * n / total:5.1f}%")
        if sass:
            listing = listings.get(name, ())
            out.append(f"  SASS ({arch}, ptxas + nvdisasm): {len(listing)} instructions")
            out.extend(f"    {ins}" for ins in listing)
    out.append(f"refsim.ptx can execute this module: {runnable}")
    return "\n".join(out)


def check_command(args) -> int:
    args.kernel = f"{args.file}:{args.kernel}"
    return _check_command.run(args)


def stats_command(args) -> int:
    path = Path(args.file)
    if not path.is_file():
        raise FormatRuleError(f"file: must be an existing .cu or .ptx file; got {args.file!r}")
    text = path.read_text()
    if path.suffix == ".cu":
        from refsim import ptx

        text = ptx.compile(text, arch=args.arch, options=tuple(args.option), include_dirs=(str(path.parent),),
                           source_name=str(path))
    elif path.suffix != ".ptx":
        raise FormatRuleError(f"file: must end in .cu or .ptx; got {path.name!r}")
    print(stats_text(text, args.arch, full=args.full, sass=args.sass))
    return 0
