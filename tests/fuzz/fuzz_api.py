"""The public API, enumerated programmatically, and the wrong arguments the fuzz test draws.

Run ``PYTHONPATH=. python tests/fuzz/fuzz_api.py --sweep [trials] [seed]`` to search at
random for functions that still break (prints a ``GAPS`` dict for ``fuzz_gaps.py``), and
``python tests/fuzz/fuzz_api.py --hostile [name ...]`` to print every finding of the hostile
fuzz (tests/test_fuzz_hostile.py) for the seeded functions whose name contains one of the names.

Public = every name in a module's ``__all__`` under :mod:`refsim` that is a function or a class,
except in the modules listed in :data:`EXCLUDED_MODULES` (each with the reason).
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil
from pathlib import Path

import numpy as np

import refsim

#: modules whose public names are not called with drawn arguments, and why (a package's entry
#: covers its submodules; refsim.ptx's pinned API, refsim.cuda's host functions and kernels,
#: refsim.testing.admissible / accuracy and refsim.data's text helpers are fuzzed)
EXCLUDED_MODULES = {
    "refsim.cli": "the command line: covered by tests/commands/test_cli_errors.py",
    "refsim.commands": "argparse plug-ins: covered by tests/commands/test_cli_errors.py",
    "refsim.report": "runs minutes of self-checks and writes files",
    "refsim.testing.bits": "assert_bitexact raises AssertionError by design (ulp_distance is fuzzed: HOSTILE_EXTRAS)",
    "refsim.testing.harness": "the hypothesis kernel harness: check_kernel raises AssertionError by design, runs kernels",
    "refsim.testing.runner": "check_kernel's runner of a user's kernel (tests/test_check_kernel_source.py)",
    "refsim.testing.sandbox": "refsim check's kernel process, started and called by refsim check "
                              "(tests/testing/test_sandbox.py, tests/commands/test_check_hostile.py)",
    "refsim.testing.kernel_process": "the loop of refsim check's kernel process and its wire format "
                                     "(tests/testing/test_kernel_process.py)",
    "refsim.testing.diagnose": "check_kernel's failure diagnosis, called with the harness's own cases",
    "refsim.testing.profiles": "hypothesis settings profiles",
    "refsim.testing.campaign": "check_kernel's parallel case runner: runs kernels on workers (tests/testing/test_campaign.py)",
    "refsim.testing.cases": "the harness's case generators, called with legal draws by check_kernel",
    "refsim.data.minilm": "downloads the MiniLM wheel (network on a first run)",
    "refsim.native.build": "builds C with the system compiler (tests/native covers its arguments)",
    "refsim.native.packers": "compiled twins with trusted (asserted) arguments: refsim.formats validates first, and "
                             "the fuzz reaches them through it",
    "refsim.native.emulators": "compiled twins with trusted (asserted) arguments: refsim.arith and refsim.emulator "
                               "validate first, and the fuzz reaches them through them",
    "refsim.native": "build switches (load, disabled); machine is fuzzed (HOSTILE_EXTRAS)",
    "refsim.ptx.barriers": "the PTX interpreter's handlers, called by the engine on parsed operands",
    "refsim.ptx.checks": "the PTX interpreter's race/poison checks, called by the engine",
    "refsim.ptx.loops": "the pure-loop deadlock rule, called by both executors on parsed instructions (tests/ptx/test_loops.py)",
    "refsim.ptx.control": "the PTX interpreter's handlers, called by the engine on parsed operands",
    "refsim.ptx.dispatch": "the dispatch table Module builds",
    "refsim.ptx.hopper": "the Hopper instruction definitions, built by both executors from parsed instructions "
                         "(tests/ptx/hopper runs them through Module.launch, which is fuzzed)",
    "refsim.ptx.memory_ops": "the PTX interpreter's handlers, called by the engine on parsed operands",
    "refsim.ptx.operands": "the PTX interpreter's operand readers, called by the engine",
    "refsim.ptx.scheduler": "the PTX interpreter's warp scheduler, called by the engine",
    "refsim.ptx.semantics": "the PTX interpreter's instruction table, called by the engine on parsed operands",
    "refsim.ptx.compiled": "the compiled executor (translator, C runner), run by Module.launch(executor=...), "
                           "which is fuzzed; tests/ptx run every kernel through both executors",
    "refsim.ptx.lex": "the lexer Module(text) runs (Module is fuzzed)",
    "refsim.ptx.parse": "the parser Module(text) runs (Module is fuzzed)",
    "refsim.ptx.memory": "the global memory of one launch, built by Module.launch",
    "refsim.ptx.replay": "replays the recorded H100 launches (tests/ptx/test_replay.py)",
    "refsim.ptx.sass": "parses nvdisasm output of a cubin (CUDA toolchain)",
    "refsim.ptx.toolchain": "runs nvcc",
    "refsim.ptx.errors": "the exception classes and their message table, worded by both executors with their own fields",
    "refsim.ptx.hopper": "the sm_90a instruction definitions, called by both executors on parsed operands "
                         "(tests/ptx/hopper)",
    "refsim.errors": "the exception classes themselves",
    "refsim._validate": "internal",
    "refsim.__main__": "runs the CLI on import",
}


def _excluded(name: str) -> bool:
    """Listed modules and their submodules, and private modules (a ``_`` part: not public API)."""
    private = any(part.startswith("_") for part in name.split(".")[1:])
    return private or any(name == m or name.startswith(m + ".") for m in EXCLUDED_MODULES)


def _module_names() -> list[str]:
    """Every module under :mod:`refsim`, with the top-level namespace packages (a folder with no
    ``__init__.py``, e.g. ``refsim/arith``), which :func:`pkgutil.walk_packages` does not enter.
    Deeper folders without ``__init__.py`` are data (a model folder's build script), not API."""
    names = [info.name for info in pkgutil.walk_packages(refsim.__path__, "refsim.")]
    for root in refsim.__path__:
        for sub in sorted(Path(root).iterdir()):
            if sub.is_dir() and sub.name.isidentifier() and not (sub / "__init__.py").exists():
                names += [info.name for info in pkgutil.walk_packages([str(sub)], f"refsim.{sub.name}.")]
    return sorted(set(names))


def public_callables() -> list[tuple[str, object]]:
    """``[(qualified name, callable)]`` for every public function and class, sorted, unique."""
    found = {}
    for name in _module_names():
        if _excluded(name):
            continue
        try:
            mod = importlib.import_module(name)
        except Exception:  # noqa: BLE001 - an optional dependency missing: not public here
            continue
        for attr in getattr(mod, "__all__", ()):
            obj = getattr(mod, attr, None)
            if not (inspect.isfunction(obj) or inspect.isclass(obj)):
                continue
            if inspect.isclass(obj) and issubclass(obj, BaseException):
                continue
            home = getattr(obj, "__module__", name) or name
            if _excluded(home):
                continue
            found.setdefault(f"{home}.{obj.__qualname__}", obj)
    return sorted(found.items())


#: public functions of the excluded modules that the hostile fuzz still calls (pure functions), and
#: public methods (``Class.method``: the seed passes the instance as the first argument)
HOSTILE_EXTRAS = ("refsim.testing.bits.ulp_distance", "refsim.native.machine.parse_size",
                  "refsim.native.machine.isa_for", "refsim.native.machine.machine_info",
                  "refsim.native.machine.MachineInfo", "refsim.ptx.module.Module.launch",
                  "refsim.ptx.module.Module.params", "refsim.ptx.module.Module.instruction_mix",
                  "refsim.ptx.module.Module.contractible")


def _resolve(name: str) -> object:
    """The object a dotted name names: the longest importable module prefix, then attributes."""
    parts = name.split(".")
    for cut in range(len(parts) - 1, 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for attr in parts[cut:]:
            obj = getattr(obj, attr)
        return obj
    raise ImportError(name)


def hostile_targets() -> dict[str, object]:
    """``{name: callable}`` the hostile fuzz may call: :func:`public_callables` and
    :data:`HOSTILE_EXTRAS`."""
    found = dict(public_callables())
    for name in HOSTILE_EXTRAS:
        found[name] = _resolve(name)
    return found


def arity(fn) -> tuple[int, int]:
    """(required positional parameters, all positional parameters) of ``fn``."""
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return 0, 0
    pos = [p for p in sig.parameters.values()
           if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    required = [p for p in pos if p.default is p.empty]
    return len(required), len(pos)


def _big_endian():
    return np.arange(12, dtype=">f4").reshape(3, 4)


def _fortran():
    return np.asfortranarray(np.arange(12, dtype=np.float32).reshape(3, 4))


def _readonly():
    a = np.ones((4, 8), np.float16)
    a.flags.writeable = False
    return a


#: wrong (or edge) values: types, special values, integer widths, layouts, sizes
WRONG_VALUES = {
    "None": lambda: None,
    "True": lambda: True,
    "str": lambda: "x",
    "float 1.5": lambda: 1.5,
    "nan": lambda: float("nan"),
    "inf": lambda: float("inf"),
    "-1": lambda: -1,
    "0": lambda: 0,
    "2**40": lambda: 2**40,
    "np.uint8(200)": lambda: np.uint8(200),
    "np.int32(-1)": lambda: np.int32(-1),
    "list": lambda: [1, 2, 3],
    "empty f32": lambda: np.zeros((0,), np.float32),
    "empty 2-D f32": lambda: np.zeros((0, 0), np.float32),
    "f64 (3,5)": lambda: np.ones((3, 5), np.float64),
    "nan f32 (4,4)": lambda: np.full((4, 4), np.nan, np.float32),
    "fortran f32": _fortran,
    "big-endian f32": _big_endian,
    "read-only f16": _readonly,
    "neg-stride i32": lambda: np.arange(16, dtype=np.int32)[::-1],
    "str array": lambda: np.array(["a", "b"]),
    "object": lambda: object(),
    "uint8 (64,32)": lambda: np.zeros((64, 32), np.uint8),
}


def sweep(trials: int = 600, seed: int = 0) -> dict[str, str]:
    """Random search: for each public callable, up to ``trials`` calls with wrong values; returns
    ``{name: first failure}`` for those that raised something other than a RefsimError or did
    not return within 3 s (run it as a script, never from the test suite)."""
    import resource
    import signal
    import warnings

    from refsim.errors import RefsimError, ToolchainError

    def alarm(*_):
        raise TimeoutError("no return within 3 s")

    signal.signal(signal.SIGALRM, alarm)
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    resource.setrlimit(resource.RLIMIT_AS, (6 << 30, hard))
    warnings.simplefilter("ignore")
    rng = np.random.default_rng(seed)
    names = list(WRONG_VALUES)
    bad = {}
    for name, fn in public_callables():
        required, total = arity(fn)
        for trial in range(trials):
            picks = [names[i] for i in rng.integers(0, len(names), required if trial % 2 == 0 else total)]
            signal.alarm(3)
            try:
                fn(*[WRONG_VALUES[p]() for p in picks])
            except (RefsimError, ToolchainError):
                pass
            except BaseException as err:  # noqa: BLE001 - classifying every escape is the point
                bad[name] = f"{type(err).__name__} with {picks}"
                break
            finally:
                signal.alarm(0)
    return bad


def hostile(names: list[str]) -> int:
    """Print every finding of the hostile fuzz (:mod:`fuzz_engine`) for the seeded functions whose
    name contains one of ``names`` (all when empty); returns the number of findings."""
    import os
    import sys
    import tempfile
    import time

    from fuzz_engine import CLASSES, fuzz_function
    from fuzz_seeds import SEEDS

    targets = hostile_targets()
    chosen = [n for n in sorted(SEEDS) if not names or any(part in n for part in names)]
    counts = dict.fromkeys(CLASSES, 0)
    calls, t0 = 0, time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        os.chdir(tmp)  # a string drawn for a path parameter writes here
        for name in chosen:
            try:
                report = fuzz_function(name, targets[name], SEEDS[name]())
            except Exception as err:  # noqa: BLE001 - a broken seed is printed, the others still run
                print(f"{name}: SEED FAILED: {type(err).__name__}: {str(err).splitlines()[0][:200]}")
                counts.setdefault("seed failed", 0)
                counts["seed failed"] += 1
                continue
            calls += report.calls
            if report.seconds > 2:
                print(f"# {name}: {report.calls} calls, {report.seconds:.1f} s", file=sys.stderr)
            for f in report.findings:
                counts[f.cls] += 1
                print(f)
    print(f"# {sum(counts.values())} findings in {calls} calls of {len(chosen)} functions, "
          f"{time.perf_counter() - t0:.1f} s: " + ", ".join(f"{c} {n}" for c, n in counts.items() if n),
          file=sys.stderr)
    return sum(counts.values())


if __name__ == "__main__":
    import sys

    if sys.argv[1:2] == ["--hostile"]:
        sys.exit(1 if hostile(sys.argv[2:]) else 0)
    if sys.argv[1:2] == ["--sweep"]:
        found = sweep(*(int(a) for a in sys.argv[2:4]))
        print("GAPS = {")
        for key, why in sorted(found.items()):
            print(f"    {key!r}: {why!r},")
        print("}")
        print(f"# {len(found)} of {len(public_callables())} public callables break", file=sys.stderr)
