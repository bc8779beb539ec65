"""The kernel in a process of its own, holding nothing that decides: ``refsim check``'s sandbox.

``refsim check`` (the parent) runs :func:`refsim.testing.check_kernel` itself, with a
:class:`KernelProcess` standing in for the kernel. Only the child process imports the user's module
(and a ``--launch`` module); it receives copies of each call's inputs and sends back bytes. The
cases, the emulator, the comparison, shrinking, diagnosis and the exit status live in the parent,
which the kernel never runs in::

    parent: refsim check (harness, emulator, comparison, verdict)   never imports the user's module
       |  call n: the inputs' bytes                 ^  reply n: the output's bytes, dtype and shape;
       v  (the parent keeps its own arrays)         |  inputs call n wrote; inputs call n-1 wrote late
    child: its own session and process group; imports MODULE; out = kernel(*its copies)

Nothing the child sends is a verdict. The parent reads one reply per call, parsed strictly
(:func:`refsim.testing.kernel_process.read_frame`, which also holds the child's loop): every array
is declared in the frame's header as a plain numeric dtype and a shape, and its size is checked
against the call's bound before any byte of it is read or allocated. Anything else (a "PASS"
line, bytes outside a call, a reply to another call) is a malformed reply: the call fails
(:class:`KernelCallError`) and the child is killed. A call past ``deadline`` seconds, and an import
past it, kill the child's process group.

Inputs the kernel writes: the child keeps the bytes it received and reports an input whose array
differs from them when the call returns (the parent writes it back into the runner's copies, whose
comparison names it) and, for writes that come later (a thread of the kernel), before the next call
and at :meth:`KernelProcess.settle` (after waiting up to ``kernel_process.SETTLE`` s for the
kernel's threads).
These reports come from the kernel's own process, so a hostile kernel can hide its writes; it
cannot change what the parent compares, whose arrays it never holds.
"""

from __future__ import annotations

import atexit
import inspect
import json
import os
import select
import signal
import subprocess
import sys
import time

import numpy as np

from refsim.errors import CompileError, FormatRuleError
from refsim.testing import kernel_process as kp
from refsim.testing.kernel_process import TEXT, Ended, MalformedReply, read_frame, write_frame
from refsim.testing.runner import KernelCallError, KernelModifiedInput, KernelTimeout, _first_change

__all__ = ["KernelProcess", "KernelLoadError", "STARTUP", "REAP", "OUTPUT_SLACK"]

#: seconds the kernel's process may take to start Python and load refsim, before the user's import
STARTUP = 120.0
#: seconds a child that closed its pipe has to end by itself before its group is killed
REAP = 5.0
#: an output may exceed the call's input bytes by this much (every format's output is smaller)
OUTPUT_SLACK = 1 << 20


class KernelLoadError(KernelCallError):
    """The kernel's process did not finish loading the kernel: it hung, ended, or sent garbage."""


# ----------------------------------------------------------------------------------------------
# the parent


def _ended(returncode: int) -> str:
    if returncode < 0:
        try:
            name = signal.Signals(-returncode).name
        except ValueError:
            name = f"signal {-returncode}"
        return f"was killed by {name}"
    return f"exited with status {returncode}"


_P = inspect.Parameter
_KINDS = (_P.POSITIONAL_ONLY, _P.POSITIONAL_OR_KEYWORD, _P.VAR_POSITIONAL, _P.KEYWORD_ONLY, _P.VAR_KEYWORD)


def _exception(name: str, text: str) -> Exception:
    """An exception named as the kernel's was (the runner reports ``raised NAME: text``)."""
    name = name if isinstance(name, str) and name.isidentifier() else "Exception"
    return type(name, (Exception,), {})(text if isinstance(text, str) else "")


class KernelProcess:
    """A kernel imported and called in a child process (module docstring); callable as the kernel.

    request: ``{"kernel": "MODULE:FUNCTION" | "FILE.cu|.ptx:ENTRY", "launch": "MODULE:FUNCTION" | None,
    "arch": "sm_80"}``. deadline: seconds for the import and for each call (None: no limit).
    ``__signature__`` is the kernel's (its parameters as the child reports them), so the harness
    infers the format from it. Calls take NumPy arrays and return the output array; the child is
    started on first need and again after it ends. Use as a context manager (or call
    :meth:`close`): the child's whole process group is killed with SIGKILL."""

    def __init__(self, request: dict, deadline: float | None):
        self.request, self.deadline = request, deadline
        self.child, self.seq, self.calls, self._sent = None, 0, 0, None
        self.__signature__ = None
        try:
            self._start()
        except BaseException:                 # a refusal, or SIGTERM / Ctrl-C while it loads
            self.close()
            raise

    def __reduce__(self):
        """Pickled for a campaign's worker (:mod:`refsim.testing.campaign`): it becomes that worker's
        own kernel process for the same request (:func:`worker_kernel`), never this process's pipes."""
        return worker_kernel, (self.request, self.deadline)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def _until(self):
        return None if self.deadline is None else time.monotonic() + self.deadline

    def _start(self) -> None:
        code = "import runpy, sys; runpy.run_path(sys.argv[1], run_name='__main__')"
        self.child = subprocess.Popen([sys.executable, "-c", code, kp.__file__, str(os.getpid()),
                                       json.dumps(self.request)],
                                      stdin=subprocess.PIPE, stdout=subprocess.PIPE, start_new_session=True)
        atexit.register(self.close)
        self._to, self._from = self.child.stdin.fileno(), self.child.stdout.fileno()
        os.set_blocking(self._to, False)
        self._sent = None
        why, importing = None, False
        try:
            started, _ = read_frame(self._from, time.monotonic() + STARTUP, 0)
            if started.get("kind") != "started":
                raise MalformedReply(f"expected a 'started' message; got kind {str(started.get('kind'))[:50]!r}")
            importing = True
            header, _ = read_frame(self._from, self._until(), 0)
        except TimeoutError:
            why = (f"hung on import: the kernel's module did not finish importing within --deadline {self.deadline:g} "
                   f"s; its process was killed" if importing else
                   f"the kernel's process did not load refsim within {STARTUP:g} s; it was killed")
        except Ended:
            self._reap()
            why = f"the kernel's process {_ended(self.child.returncode)} while importing the kernel"
        except MalformedReply as err:
            why = f"the kernel's process sent a malformed message while importing the kernel: {err}"
        else:
            if header.get("kind") == "refused" and isinstance(header.get("text"), str):
                self.close()
                raise (CompileError if header.get("compile") is True else FormatRuleError)(header["text"][:TEXT])
            try:
                self.__signature__ = self._signature(header)
            except (TypeError, ValueError) as err:
                why = f"the kernel's process sent a malformed message while importing the kernel: {err}"
        if why is not None:
            self.close()
            raise KernelLoadError(why)

    @staticmethod
    def _signature(header: dict):
        if header.get("kind") != "ready":
            raise ValueError(f"expected a 'ready' message; got kind {str(header.get('kind'))[:50]!r}")
        params = header.get("params")
        if params is None:
            return None
        if not isinstance(params, list) or len(params) > 256:
            raise ValueError("params must be a list of at most 256 parameters")
        out = []
        for p in params:
            if not (isinstance(p, list) and len(p) == 3 and isinstance(p[0], str) and p[0].isidentifier()
                    and type(p[1]) is int and 0 <= p[1] <= 4 and type(p[2]) is bool):
                raise ValueError(f"a parameter must be [identifier, kind 0..4, has default]; got {str(p)[:100]}")
            out.append(inspect.Parameter(p[0], _KINDS[p[1]], default=None if p[2] else inspect.Parameter.empty))
        return inspect.Signature(out)

    def close(self) -> None:
        """Kill the child's process group (SIGKILL) and reap the child; idempotent."""
        if self.child is not None:
            try:
                os.killpg(self.child.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
            for f in (self.child.stdin, self.child.stdout):
                try:
                    f.close()
                except OSError:
                    pass
            self.child.wait()
        atexit.unregister(self.close)

    def _reap(self) -> None:
        """The child closed its pipe: let it end by itself (its status says how), then close."""
        try:
            self.child.wait(REAP)
        except subprocess.TimeoutExpired:
            pass
        self.close()

    def _dead(self) -> bool:
        return self.child is None or self.child.returncode is not None

    def _fail(self, why: str, cls=KernelCallError):
        self.close()
        return cls(why)

    def _exchange(self, header: dict, arrays: list, max_payload: int, what: str):
        """Send one request, read its reply (module docstring); KernelCallError for anything else."""
        if self._dead():
            self._start()
        self._nothing_pending()
        self.seq += 1
        until = self._until()
        try:
            write_frame(self._to, {**header, "seq": self.seq}, arrays, until)
            reply, out = read_frame(self._from, until, max_payload)
        except TimeoutError:
            raise self._fail(f"did not return within deadline={self.deadline} s ({what}); its process was killed",
                             KernelTimeout) from None
        except Ended:
            self._reap()
            raise KernelCallError(f"ended its process {what}: it {_ended(self.child.returncode)} (a kernel must "
                                  f"return its output)") from None
        except MalformedReply as err:
            raise self._fail(f"sent a malformed reply ({what}): {err}") from None
        if reply.get("seq") != self.seq:
            raise self._fail(f"sent a malformed reply ({what}): seq must be {self.seq}; got {str(reply.get('seq'))[:50]}")
        return reply, out

    def _indices(self, reply: dict, key: str, sent) -> list:
        got = reply.get(key)
        n = 0 if sent is None else len(sent)
        if not (isinstance(got, list) and all(type(i) is int and 0 <= i < n for i in got) and len(set(got)) == len(got)):
            raise self._fail(f"sent a malformed reply: {key!r} must list distinct input indices below {n}; "
                             f"got {str(got)[:100]}")
        return got

    def _late_writes(self, late: list, arrays: list, prev, call: int, seen: str) -> None:
        for i, a in zip(late, arrays):
            if a.dtype != prev[i].dtype or a.shape != prev[i].shape:
                raise self._fail("sent a malformed reply: a late-written input's dtype or shape is not the input's")
        if late:
            i = late[0]
            raise KernelModifiedInput(f"modified input {i + 1} of {len(prev)} after kernel call {call} returned "
                                      f"(inputs are read-only; a late write, from a thread or process the kernel left "
                                      f"running, seen {seen}): {_first_change(prev[i], arrays[0])}")

    def __call__(self, *inputs):
        sent, prev = [np.array(x, copy=True) for x in inputs], self._sent
        budget = sum(x.nbytes for x in sent)
        bound = 2 * budget + OUTPUT_SLACK + (0 if prev is None else sum(x.nbytes for x in prev))
        reply, arrays = self._exchange({"kind": "call"}, sent, bound, "during a kernel call")
        self._sent = sent
        self.calls += 1
        late, changed = self._indices(reply, "late", prev), self._indices(reply, "changed", sent)
        status = reply.get("status")
        n_out = 1 if status == "ok" else 0
        if len(arrays) != n_out + len(changed) + len(late) or (n_out and arrays[0].nbytes > budget + OUTPUT_SLACK):
            raise self._fail("sent a malformed reply: its arrays are not the output, the inputs the call wrote and "
                             "the inputs written late")
        self._late_writes(late, arrays[n_out + len(changed):], prev, self.calls - 1,
                          f"when kernel call {self.calls} began; the case below is call {self.calls}'s")
        for i, a in zip(changed, arrays[n_out:]):
            if a.dtype != sent[i].dtype or a.shape != sent[i].shape:
                raise self._fail("sent a malformed reply: a written input's dtype or shape is not the input's")
            np.copyto(inputs[i], a)            # the runner compares its copies with the inputs: it names the write
        if status == "ok":
            return arrays[0].copy()
        if status == "exit" and (reply.get("code") is None or type(reply.get("code")) in (int, str)):
            raise SystemExit(reply["code"])
        if status == "raised":
            raise _exception(reply.get("type"), reply.get("text"))
        if status == "returned" and isinstance(reply.get("what"), str):
            raise KernelCallError(f"returned {reply['what'][:200]}; expected a numpy.ndarray of the format's dtype "
                                  f"and shape")
        raise self._fail(f"sent a malformed reply: status {str(status)[:50]!r}")

    def settle(self) -> None:
        """After the last call: let the kernel's threads finish (up to ``kernel_process.SETTLE`` s there),
        then KernelModifiedInput if the last call's inputs were written since it returned."""
        if self._dead() or self._sent is None:
            return
        prev = self._sent
        try:
            reply, arrays = self._exchange({"kind": "settle"}, [], sum(x.nbytes for x in prev), "after its last call")
            late = self._indices(reply, "late", prev)
            if len(arrays) != len(late) or reply.get("kind") != "settled":
                raise self._fail("sent a malformed reply: a settle reply holds only the inputs written late")
            self._late_writes(late, arrays, prev, self.calls, "at the end of the check")
            self._nothing_pending()
        except KernelCallError as err:        # no case to name: say whose it is
            raise type(err)(f"kernel {err}") from None

    def _nothing_pending(self) -> None:
        """Between calls the child has nothing to say: bytes there are malformed, end of file an ended process."""
        if not select.select([self._from], [], [], 0)[0]:
            return
        if os.read(self._from, 1):
            raise self._fail("wrote to refsim check's pipe outside a call (malformed: refsim check reads only the "
                             "output of each call)")
        self._reap()
        raise KernelCallError(f"ended its process between calls: it {_ended(self.child.returncode)} (a kernel must "
                              f"return its output, and leave nothing running)")


# ----------------------------------------------------------------------------------------------
# a campaign's worker: one kernel process per worker and request

_WORKER_KERNELS: dict = {}


def worker_kernel(request: dict, deadline) -> KernelProcess:
    """This worker's :class:`KernelProcess` for ``request`` (started once, killed when the worker
    exits; its parent-death signal ends it too): what a pickled KernelProcess becomes on a worker."""
    key = (tuple(sorted(request.items())), deadline)
    if key not in _WORKER_KERNELS:
        if not _WORKER_KERNELS:
            atexit.register(_close_worker_kernels)
        _WORKER_KERNELS[key] = KernelProcess(dict(request), deadline)
    return _WORKER_KERNELS[key]


def _close_worker_kernels() -> None:
    for k in _WORKER_KERNELS.values():
        k.close()
    _WORKER_KERNELS.clear()
