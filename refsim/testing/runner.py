"""Running one case of :func:`refsim.testing.check_kernel`: the kernel's call, guarded.

The kernel receives copies of the inputs. After every call the copies are compared bit for bit
with the inputs: a kernel that writes to an input (zeroes A after computing C, say) fails, naming
the input, even when its output is right, because on a GPU it would corrupt the caller's tensors.
A call that raises, calls ``sys.exit``, overruns ``deadline`` seconds or returns something that
is not an array of the expected dtype and shape fails at once, with its case::

    inputs --copy--> kernel(*copies) --> output: an ndarray of the emulator's dtype and shape?
                        |  deadline: SIGALRM (Python code, main thread), else timed after it returns
                        +--> copies == inputs, bit for bit?  (else KernelModifiedInput)
"""

from __future__ import annotations

import signal
import threading
import time

import numpy as np

from refsim.arith.admissible import AdmissibleSet
from refsim.arith.fp import raw_bits  # public here: the bits every exact comparison compares

__all__ = ["KernelMismatch", "KernelCallError", "KernelTimeout", "KernelModifiedInput", "Runner", "raw_bits",
           "snippet"]


class KernelMismatch(AssertionError):
    """The kernel's output differs from the emulator's (or, in accuracy mode, leaves the derived
    error bound); the message is the full report. ``case`` is the (shrunk) failing case."""

    def __init__(self, report: str, case: dict | None = None):
        super().__init__(report)
        self.case = case


class KernelCallError(AssertionError):
    """The kernel raised, exited, or returned something that is not an array of the right shape and dtype."""

    def __init__(self, report: str, case: dict | None = None):
        super().__init__(report)
        self.case = case


class KernelTimeout(KernelCallError):
    """One kernel call took longer than ``deadline`` seconds."""


class KernelModifiedInput(KernelCallError):
    """The kernel wrote to one of its inputs (they are read-only: on a GPU they are the caller's tensors)."""


def snippet(spec, case: dict) -> str:
    """The one line that rebuilds a case's inputs."""
    return f"refsim.testing.rebuild_case({ {'fmt': spec.name, **case}!r})"


def _first_change(before: np.ndarray, after: np.ndarray) -> str:
    changed = raw_bits(before) != raw_bits(after)
    where = tuple(int(i) for i in np.argwhere(changed)[0])
    width = 2 * before.dtype.itemsize
    return (f"{int(changed.sum())} of {before.size} elements changed, first at {where}: "
            f"0x{int(raw_bits(before)[where]):0{width}x} -> 0x{int(raw_bits(after)[where]):0{width}x}")


class Runner:
    """Calls one kernel on the cases of one format, architecture and SM count."""

    def __init__(self, kernel, spec, arch: str, sms: int, deadline: float | None):
        self.kernel, self.spec, self.arch, self.sms, self.deadline = kernel, spec, arch, sms, deadline
        self.admissible: list[str] = []       # verdicts of the cases whose emulation is a set

    def _fail(self, kind, what: str, case: dict):
        return kind(f"{self.spec.name} kernel {what}\n  case {case}\n  rebuild: {snippet(self.spec, case)}", case)

    def call(self, case: dict, inputs: tuple):
        """The kernel's output on copies of ``inputs``; KernelCallError (or a subclass) at once."""
        copies = tuple(x.copy() for x in inputs)
        use_alarm = self.deadline is not None and threading.current_thread() is threading.main_thread()
        old = None

        def _alarm(signum, frame):
            raise self._fail(KernelTimeout, f"did not return within deadline={self.deadline} s (one call)", case)

        t0 = time.perf_counter()
        try:
            if use_alarm:
                old = signal.signal(signal.SIGALRM, _alarm)
                signal.setitimer(signal.ITIMER_REAL, self.deadline)
            out = self.kernel(*copies)
        except KernelCallError as err:
            if err.case is not None:
                raise
            # from a kernel standing in for another process (refsim.testing.sandbox): add the case
            raise self._fail(type(err), str(err), case) from None
        except SystemExit as err:      # a kernel ends nothing but its own call
            raise self._fail(KernelCallError, f"called sys.exit({err.code!r}) (a kernel must return its output)",
                             case) from None
        except Exception as err:
            raise self._fail(KernelCallError, f"raised {type(err).__name__}: {err}", case) from err
        finally:
            if use_alarm:
                signal.setitimer(signal.ITIMER_REAL, 0)
                signal.signal(signal.SIGALRM, old)
        took = time.perf_counter() - t0
        if self.deadline is not None and took > self.deadline:
            raise self._fail(KernelTimeout, f"took {took:.2f} s for one call > deadline={self.deadline} s", case)
        for i, (before, after) in enumerate(zip(inputs, copies)):
            if not np.array_equal(raw_bits(before), raw_bits(after)):
                raise self._fail(KernelModifiedInput,
                                 f"modified its input {self.spec.inputs[i]!r} (input {i + 1} of {len(inputs)}; inputs "
                                 f"are read-only): {_first_change(before, after)}", case)
        return out

    def expected(self, inputs: tuple) -> np.ndarray:
        return self.spec.emulate(inputs, self.arch, self.sms)

    def output(self, case: dict, inputs: tuple, expected: np.ndarray) -> np.ndarray:
        """The kernel's output, checked to be an ndarray of ``expected``'s dtype and shape."""
        actual = self.call(case, inputs)
        if not isinstance(actual, np.ndarray) or actual.dtype != expected.dtype or actual.shape != expected.shape:
            got = (f"dtype {actual.dtype} shape {actual.shape}" if isinstance(actual, np.ndarray)
                   else type(actual).__name__)
            raise self._fail(KernelCallError, f"returned {got}; expected a numpy.ndarray of dtype {expected.dtype} "
                                              f"shape {expected.shape}", case)
        return actual

    def differs(self, case: dict, inputs: tuple, expected: np.ndarray | None = None):
        """(actual, expected, bool mask of differing bits) for one case; call errors raise."""
        expected = self.expected(inputs) if expected is None else expected
        actual = self.output(case, inputs, expected)
        if isinstance(expected, AdmissibleSet):   # a set-valued emulation: any member is equal
            self.admissible.append(expected.verdict(actual))
            return actual, expected.reference, ~expected.contains(actual)
        return actual, expected, raw_bits(actual) != raw_bits(expected)
