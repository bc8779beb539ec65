"""Run one public function on every variant of a legal call and classify what goes wrong.

For each parameter of a legal call (:mod:`fuzz_seeds`), every replacement from
:func:`fuzz_values.variants_for` is tried with the other arguments unchanged. The failure classes:

    foreign exception       anything but a RefsimError / ToolchainError escapes
    hang or huge allocation no return within the per-call bound, or MemoryError / the address-
                            space bound hit (a zero-stride view materialised, a loop over a
                            claimed size)
    layout/width-dependent  the same values in another layout, byte order or integer width give
                            other bits, or a legal NumPy scalar is refused
    scalar-type leak        the same values give the same numbers in other types (a float32 out
                            for a Python float in, an ndarray subclass passed through)
    input modified          an argument's bits changed (unless the API says it modifies it)
    misnamed non-finite     a value that differs from a legal one only by a NaN/Inf is refused
                            with another error than NonFiniteError
    crash                   the process died (a segfault in native code, ``os._exit``)

Each function is fuzzed in a forked child process that reports as it goes: a call that crashes
the child or outlasts the bound inside C code (where SIGALRM is never seen: a loop over a 2**36-
element zero-stride view) is recorded by the parent, which kills the child and starts another at
the next variant. Inside the child every call runs under SIGALRM and an address-space limit.
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import faulthandler
import inspect
import os
import pickle
import re
import resource
import select
import signal
import time
import types
import warnings
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path
from typing import Any, Callable

import numpy as np

from fuzz_values import HOSTILE, SAME, SAME_OR_REFUSED, Variant, variants_for

from refsim.errors import NonFiniteError, RefsimError, ToolchainError

FOREIGN = "foreign exception"
HANG = "hang or huge allocation"
DEPENDENT = "layout- or width-dependent result"
LEAK = "scalar-type leak"
MODIFIED = "input modified"
MISNAMED = "misnamed non-finite error"
CRASH = "crash"
CLASSES = (FOREIGN, HANG, DEPENDENT, LEAK, MODIFIED, MISNAMED, CRASH)

#: per-call wall-time bound (seconds) and address space a call may add (bytes)
CALL_SECONDS = float(os.environ.get("REFSIM_FUZZ_CALL_SECONDS", 10))
EXTRA_ADDRESS_SPACE = 3 << 30


@dataclass
class Seed:
    """A legal call: positional ``args``, keyword ``kwargs``; ``mutates`` names the parameters the
    API documents as modified in place (their bits are not compared); ``view`` maps a result to the
    part that must not change (a result that also reports measured seconds or bytes)."""

    args: tuple = ()
    kwargs: dict = field(default_factory=dict)
    mutates: tuple = ()
    view: Callable[[Any], Any] | None = None


def call(*args, **kwargs) -> Seed:
    return Seed(args, kwargs)


@dataclass(frozen=True)
class Finding:
    function: str
    cls: str
    slot: str
    label: str
    via: str
    detail: str

    def __str__(self) -> str:
        where = f"{self.slot} <- {self.label}" + (f" (via {self.via})" if self.via != "arg" else "")
        return f"{self.function}: {self.cls}: {where}: {' '.join(self.detail.split())}"  # one line


class CallBoundExceeded(BaseException):
    """Raised by the alarm (a BaseException, so a function's ``except Exception`` cannot eat it)."""


@dataclass
class Outcome:
    status: str              # "ok", "refused", "foreign", "timeout", "memory"
    result: Any = None
    error: BaseException | None = None
    seconds: float = 0.0

    @property
    def detail(self) -> str:
        if self.error is None:
            return self.status
        first = str(self.error).splitlines()[0] if str(self.error) else ""
        return f"{type(self.error).__name__}: {first[:160]}"


def _vm_bytes() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmSize:"):
            return int(line.split()[1]) * 1024
    return 0


@contextlib.contextmanager
def bounded(seconds: float, extra_bytes: int = EXTRA_ADDRESS_SPACE):
    """SIGALRM after ``seconds`` and at most ``extra_bytes`` more address space, restored after."""
    def alarm(signum, frame):
        raise CallBoundExceeded(f"no return within {seconds:g} s")

    old = signal.signal(signal.SIGALRM, alarm)
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    limit = _vm_bytes() + extra_bytes
    if hard != resource.RLIM_INFINITY:
        limit = min(limit, hard)
    resource.setrlimit(resource.RLIMIT_AS, (limit, hard))
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))
        signal.signal(signal.SIGALRM, old)


def run_call(fn: Callable, args: tuple, kwargs: dict, seconds: float = CALL_SECONDS) -> Outcome:
    """``fn(*args, **kwargs)`` in this process under :func:`bounded`."""
    t0 = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            with bounded(seconds):
                result = fn(*args, **kwargs)
        except CallBoundExceeded as err:
            return Outcome("timeout", error=err, seconds=time.perf_counter() - t0)
        except MemoryError as err:
            return Outcome("memory", error=err, seconds=time.perf_counter() - t0)
        except (RefsimError, ToolchainError) as err:
            return Outcome("refused", error=err, seconds=time.perf_counter() - t0)
        except (KeyboardInterrupt, SystemExit):
            raise
        except BaseException as err:  # noqa: BLE001 - classifying every escape is the point
            return Outcome("foreign", error=err, seconds=time.perf_counter() - t0)
    return Outcome("ok", result=result, seconds=time.perf_counter() - t0)


# ---- comparing results and inputs ------------------------------------------------------------------
_ADDRESS = re.compile(r" at 0x[0-9a-fA-F]+")
_BIG = 1 << 24


def fingerprint(x: Any, loose: bool = False, depth: int = 0) -> Any:
    """A comparable digest of ``x``: types and raw bits. ``loose`` maps NumPy scalars to Python
    numbers and ndarray subclasses to ndarray (what stays equal under a scalar-type leak)."""
    if depth > 12:
        return ("deep",)
    d = depth + 1
    if isinstance(x, np.ndarray):
        kind = "ndarray" if loose or type(x) is np.ndarray else type(x).__name__
        if x.size > _BIG:
            return (kind, x.dtype.str, x.shape, x.strides, "unread")
        body = x.tobytes() if x.dtype != object else repr(x.tolist()).encode()
        return (kind, x.dtype.str, x.shape, body)
    if isinstance(x, np.generic):
        if loose:
            return fingerprint(x.item(), loose, d)
        return (type(x).__name__, x.tobytes() if x.dtype != object else repr(x))
    if isinstance(x, (bool, int, float, complex, str, bytes, type(None))):
        return (type(x).__name__, repr(x))
    if isinstance(x, (Fraction, Path, np.dtype)):
        return (type(x).__name__, str(x))
    if dataclasses.is_dataclass(x) and not isinstance(x, type):
        return (type(x).__name__,) + tuple((f.name, fingerprint(getattr(x, f.name), loose, d))
                                           for f in dataclasses.fields(x))
    if isinstance(x, (list, tuple)):
        return (type(x).__name__,) + tuple(fingerprint(e, loose, d) for e in x)
    if isinstance(x, dict):
        return ("dict",) + tuple(sorted(((repr(k), fingerprint(v, loose, d)) for k, v in x.items()),
                                        key=lambda kv: kv[0]))
    if isinstance(x, type) or callable(x) and hasattr(x, "__qualname__"):
        return ("callable", getattr(x, "__module__", ""), getattr(x, "__qualname__", repr(x)))
    if type(x).__module__.startswith("refsim.") and hasattr(x, "__dict__") and not isinstance(x, types.ModuleType):
        return (type(x).__name__, fingerprint(vars(x), loose, d))  # a plain record class: its attributes
    return (type(x).__name__, _ADDRESS.sub("", repr(x)))


def _input_state(x: Any) -> Any:
    """What must not change in an argument: its bits (and, for arrays, writeability)."""
    if isinstance(x, np.ndarray):
        return (fingerprint(x), x.flags.writeable)
    return fingerprint(x)


def _copy(x: Any) -> Any:
    try:
        return copy.deepcopy(x)
    except Exception:  # noqa: BLE001 - objects that cannot be copied are passed as they are
        return x


# ---- the driver ----------------------------------------------------------------------------------
def bind(fn: Callable, seed: Seed) -> inspect.BoundArguments:
    """The seed's arguments bound to ``fn``'s signature, every default filled in."""
    ba = inspect.signature(fn).bind(*seed.args, **seed.kwargs)
    ba.apply_defaults()
    return ba


def _fuzzable(fn: Callable) -> list[str]:
    """The parameters to vary: all but ``*args`` / ``**kwargs`` and a method's ``self`` (the seed's
    instance is the object under test, not an argument)."""
    params = list(inspect.signature(fn).parameters.values())
    return [p.name for i, p in enumerate(params)
            if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD) and not (i == 0 and p.name == "self")]


class SeedFailed(AssertionError):
    """The legal call itself does not return: the seed table is wrong (or the function broke)."""


@dataclass
class Report:
    function: str
    findings: list[Finding] = field(default_factory=list)
    calls: int = 0
    seconds: float = 0.0


def _prepare(var: Variant, name: str):
    """``(value, None)`` or ``(None, finding-or-None)``: building a dataclass variant runs the class's
    own checks; a RefsimError or a frozen class ends the variant there."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # casts that overflow are the point of some variants
            return var.make(), None
    except dataclasses.FrozenInstanceError:
        return None, "skip"
    except (RefsimError, ToolchainError):
        return None, "skip"
    except Exception as err:  # noqa: BLE001
        owner = var.slot.split(".")[0]
        return None, Finding(f"{name} (constructing {owner}'s class)", FOREIGN, var.slot, var.label, var.via,
                             f"{type(err).__name__}: {str(err).splitlines()[0][:160] if str(err) else ''}")


def variant_list(fn: Callable, seed: Seed) -> list[tuple[str, Variant]]:
    """``[(parameter, variant)]`` in the order the fuzz tries them (the same in parent and child)."""
    ba = bind(fn, seed)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # float16(1e9) overflows while the widths are listed
        return [(pname, var) for pname in _fuzzable(fn)
                for var in variants_for(pname, ba.arguments[pname], mutated=pname in seed.mutates)]


def _fuzz_variants(name: str, fn: Callable, seed: Seed, todo: list[tuple[int, str, Variant]], emit,
                   seconds: float, retry_hangs: bool = True) -> None:
    """Run the variants ``todo`` (index, parameter, variant), calling ``emit(message)`` with
    ``("start", index)`` before each call and ``("finding", Finding)`` for each failure."""
    ba = bind(fn, seed)
    legal = _bound_copy(ba, {})
    base = run_call(fn, legal.args, legal.kwargs, seconds=max(seconds, 60.0))
    if base.status != "ok":
        raise SeedFailed(f"{name}: the legal call did not return: {base.detail}")

    def seen(result):
        """The part of a result compared (all of it, or the seed's ``view`` of it)."""
        if seed.view is None:
            return result
        try:
            return seed.view(result)
        except Exception:  # noqa: BLE001 - a result of another shape is compared whole
            return result

    expected = {None: (fingerprint(seen(base.result)), fingerprint(seen(base.result), loose=True))}

    def expected_for(pname, var):
        """``(strict, loose)`` fingerprints of the result the variant must give, or None when its
        baseline value is itself refused (then a refusal of the variant is right too)."""
        key = (var.slot, var.label) if var.baseline is not None else None
        if key not in expected:
            expected[key] = None
            bvalue, stop = _prepare(dataclasses.replace(var, make=var.baseline), name)
            if stop is None:
                bnew = _bound_copy(ba, {pname: bvalue})
                bout = run_call(fn, bnew.args, bnew.kwargs, seconds=seconds)
                if bout.status == "ok":
                    expected[key] = (fingerprint(seen(bout.result)), fingerprint(seen(bout.result), loose=True))
        return expected[key]

    def add(cls, var, detail):
        emit(("finding", Finding(name, cls, var.slot, var.label, var.via, detail)))

    for index, pname, var in todo:
        emit(("start", index))
        value, stop = _prepare(var, name)
        if stop is not None:
            if isinstance(stop, Finding):
                emit(("finding", stop))
            continue
        new = _bound_copy(ba, {pname: value})
        before = {k: _input_state(v) for k, v in new.arguments.items() if k not in seed.mutates}
        out = run_call(fn, new.args, new.kwargs, seconds)
        if out.status == "timeout" and retry_hangs:  # a busy machine, or a real hang: once more, 3x the time
            new = _bound_copy(ba, {pname: _prepare(var, name)[0]})
            before = {k: _input_state(v) for k, v in new.arguments.items() if k not in seed.mutates}
            out = run_call(fn, new.args, new.kwargs, 3 * seconds)
        if out.status in ("timeout", "memory"):
            add(HANG, var, out.detail)
            continue
        if out.status == "foreign":
            add(FOREIGN, var, out.detail)
            continue
        changed = [k for k, state in before.items() if not var.huge and _input_state(new.arguments[k]) != state]
        if changed:
            add(MODIFIED, var, f"{', '.join(changed)} changed")
        if out.status == "refused":
            if var.kind == SAME and expected_for(pname, var) is not None:
                add(DEPENDENT, var, f"refused a legal value: {out.detail}")
            elif var.nonfinite and not isinstance(out.error, NonFiniteError):
                add(MISNAMED, var, f"refused with {out.detail}")
            continue
        if var.kind in (SAME, SAME_OR_REFUSED):
            want = expected_for(pname, var)
            if want is None:
                add(DEPENDENT, var, "accepted, while the same values in the legal layout or type are refused")
            elif fingerprint(seen(out.result)) != want[0]:
                same_numbers = fingerprint(seen(out.result), loose=True) == want[1]
                add(LEAK if same_numbers else DEPENDENT, var,
                    _difference(out.result, base.result if var.baseline is None else None))


def _send(fd: int, message) -> None:
    data = pickle.dumps(message)
    os.write(fd, len(data).to_bytes(8, "little") + data)


def _child(name, fn, seed, todo, seconds, retry_hangs) -> tuple[int, int]:
    """Fork a child that runs ``todo`` and streams its messages; ``(pid, read fd)``."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: never returns into the caller (pytest's own cleanup is the parent's)
        code = 0
        try:
            os.close(r)
            faulthandler.disable()  # a crash is reported by the parent, not dumped into the test output
            _fuzz_variants(name, fn, seed, todo, lambda m: _send(w, m), seconds, retry_hangs)
            _send(w, ("done",))
        except BaseException as err:  # noqa: BLE001 - the parent reports it
            with contextlib.suppress(Exception):
                _send(w, ("error", f"{type(err).__name__}: {err}"))
            code = 1
        finally:
            os._exit(code)
    os.close(w)
    return pid, r


def _messages(r: int, idle_seconds: Callable[[], float]):
    """Messages from a child's pipe; ``None`` once it has been silent for ``idle_seconds()``."""
    buf = b""
    while True:
        while len(buf) >= 8 and len(buf) >= 8 + int.from_bytes(buf[:8], "little"):
            n = int.from_bytes(buf[:8], "little")
            yield pickle.loads(buf[8:8 + n])
            buf = buf[8 + n:]
        ready, _, _ = select.select([r], [], [], idle_seconds())
        if not ready:
            yield None
            return
        chunk = os.read(r, 1 << 20)
        if not chunk:
            return
        buf += chunk


def fuzz_function(name: str, fn: Callable, seed: Seed, *, select_variant: Callable[[Variant], bool] | None = None,
                  seconds: float = CALL_SECONDS, isolate: bool = True, retry_hangs: bool = True) -> Report:
    """Every variant of every parameter of ``seed`` (those ``select_variant`` keeps) against ``fn``.

    ``isolate`` (the default) runs them in forked children, so a crash or a hang inside C code is a
    finding, not the end of the run; ``isolate=False`` runs them here (for a debugger).
    ``retry_hangs``: a call over the bound is tried once more with 3x the time before it counts
    (a busy machine is not a hang); False reports it at once (faster on code that really hangs)."""
    report = Report(name)
    t_start = time.perf_counter()
    todo = [(i, p, v) for i, (p, v) in enumerate(variant_list(fn, seed))
            if select_variant is None or select_variant(v)]
    report.calls = len(todo)
    if not isolate:
        def emit(message):
            if message[0] == "finding":
                report.findings.append(message[1])
        _fuzz_variants(name, fn, seed, todo, emit, seconds, retry_hangs)
        report.seconds = time.perf_counter() - t_start
        return report
    by_index = {i: v for i, _, v in todo}
    patience = 1.0            # a variant killed once for silence is tried again with 3x the time
    retried: set[int] = set()
    while todo:
        bound = seconds * patience
        pid, r = _child(name, fn, seed, todo, bound, retry_hangs)
        current, finished, error = None, False, None
        # a variant may make two calls (its own and its baseline's); the legal call comes first
        idle = lambda: 2 * bound + 3.0 if current is not None else max(60.0, bound)  # noqa: E731
        try:
            for message in _messages(r, idle):
                if message is None:
                    break
                if message[0] == "start":
                    current = message[1]
                elif message[0] == "finding":
                    report.findings.append(message[1])
                elif message[0] == "done":
                    finished = True
                elif message[0] == "error":
                    error = message[1]
        finally:
            os.close(r)
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
            _, status = os.waitpid(pid, 0)
        if error is not None:
            raise SeedFailed(f"{name}: {error}")
        if finished:
            break
        if current is None:
            raise SeedFailed(f"{name}: the child died before its first variant (status {status})")
        var = by_index[current]
        killed = not (os.WIFSIGNALED(status) and os.WTERMSIG(status) != signal.SIGKILL) and not os.WIFEXITED(status)
        if killed and retry_hangs and current not in retried:  # a busy machine, or a real hang: once more
            retried.add(current)
            patience = 3.0
            todo = [t for t in todo if t[0] >= current]
            continue
        patience = 1.0
        if os.WIFSIGNALED(status) and os.WTERMSIG(status) != signal.SIGKILL:
            cls, detail = CRASH, f"the process died of signal {os.WTERMSIG(status)}"
        elif os.WIFEXITED(status):
            cls, detail = CRASH, f"the process exited with status {os.WEXITSTATUS(status)}"
        else:
            cls, detail = HANG, f"no return within {2 * bound + 3:g} s, twice (stuck outside Python; killed)"
        report.findings.append(Finding(name, cls, var.slot, var.label, var.via, detail))
        todo = [t for t in todo if t[0] > current]
    report.seconds = time.perf_counter() - t_start
    return report


def _difference(got, want) -> str:
    def types(x, depth=0):
        if depth > 3:
            return "..."
        if isinstance(x, np.ndarray):
            return f"{type(x).__name__}[{x.dtype.str}]{x.shape}"
        if isinstance(x, (list, tuple)):
            return type(x).__name__ + "(" + ", ".join(types(e, depth + 1) for e in list(x)[:4]) + ")"
        if dataclasses.is_dataclass(x) and not isinstance(x, type):
            return type(x).__name__ + "{" + ", ".join(f"{f.name}: {types(getattr(x, f.name), depth + 1)}"
                                                  for f in dataclasses.fields(x)[:6]) + "}"
        return f"{type(x).__name__}({_ADDRESS.sub('', repr(x))[:40]})"
    text = f"got {types(got)}"
    if want is not None:
        text += f", legal call gave {types(want)}"
    return text[:300]


def _bound_copy(ba: inspect.BoundArguments, replace: dict) -> inspect.BoundArguments:
    """Deep copies of the bound arguments with ``replace`` applied (``.args`` / ``.kwargs`` to call)."""
    return inspect.BoundArguments(ba.signature, {k: replace[k] if k in replace else _copy(v)
                                                 for k, v in ba.arguments.items()})


__all__ = ["Seed", "call", "Finding", "Report", "CLASSES", "FOREIGN", "HANG", "DEPENDENT", "LEAK", "MODIFIED",
           "MISNAMED", "CRASH", "fuzz_function", "variant_list", "run_call", "fingerprint", "SeedFailed", "HOSTILE"]
