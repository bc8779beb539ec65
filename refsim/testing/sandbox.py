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
(:func:`read_frame`): a frame is ``b"RSK1"``, a little-endian u32 header length (at most
:data:`MAX_HEADER` bytes), a JSON header, then the arrays' bytes in C order. Every array is declared
in the header as a plain numeric dtype (``[<>|][biuf][1248]``) and a shape; its size is checked
against the call's bound before any byte of it is read or allocated. Anything else (a "PASS"
line, bytes outside a call, a reply to another call) is a malformed reply: the call fails
(:class:`KernelCallError`) and the child is killed. A call past ``deadline`` seconds, and an import
past it, kill the child's process group.

Inputs the kernel writes: the child keeps the bytes it received and reports an input whose array
differs from them when the call returns (the parent writes it back into the runner's copies, whose
comparison names it) and, for writes that come later (a thread of the kernel), before the next call
and at :meth:`KernelProcess.settle` (after waiting up to :data:`SETTLE` s for the kernel's threads).
These reports come from the kernel's own process, so a hostile kernel can hide its writes; it
cannot change what the parent compares, whose arrays it never holds.
"""

from __future__ import annotations

import atexit
import ctypes
import importlib
import importlib.util
import inspect
import json
import math
import os
import re
import select
import signal
import struct
import subprocess
import sys
import threading
import time

import numpy as np

from refsim.errors import FormatRuleError, RefsimError, ToolchainError
from refsim.testing.runner import KernelCallError, KernelModifiedInput, KernelTimeout, _first_change

__all__ = ["KernelProcess", "KernelLoadError", "MalformedReply", "load_kernel", "read_frame", "write_frame", "serve",
           "MAX_HEADER", "SETTLE", "STARTUP"]

MAGIC = b"RSK1"
#: the largest JSON header a frame may declare, in bytes
MAX_HEADER = 1 << 16
#: seconds the child waits, at the end of the check, for threads the kernel started (late writes)
SETTLE = 1.0
#: seconds the kernel's process may take to start Python and load refsim, before the user's import
STARTUP = 120.0
#: seconds a child that closed its pipe has to end by itself before its group is killed
REAP = 5.0
#: an output may exceed the call's input bytes by this much (every format's output is smaller)
OUTPUT_SLACK = 1 << 20
_DTYPE = re.compile(r"[<>|][biuf][1248]\Z")
_MAX_NDIM = 8
_TEXT = 2000                                 # characters of a child's message kept


class KernelLoadError(KernelCallError):
    """The kernel's process did not finish loading the kernel: it hung, ended, or sent garbage."""


class MalformedReply(Exception):
    """A frame that breaks the wire format (the reason is the message)."""


class _Ended(Exception):
    """The other end closed the pipe."""


# ----------------------------------------------------------------------------------------------
# frames


def _declare(x: np.ndarray) -> list:
    return [x.dtype.str, list(x.shape)]


def _ready(fd: int, until: float | None, write: bool = False) -> bool:
    """Whether ``fd`` can be read (written) before ``until``; _Ended for a closed fd."""
    left = None if until is None else until - time.monotonic()
    if left is not None and left <= 0:
        return False
    try:
        r, w, _ = select.select([] if write else [fd], [fd] if write else [], [], left)
    except (OSError, ValueError) as err:
        raise _Ended(str(err)) from None
    return bool(w if write else r)


def write_frame(fd: int, header: dict, arrays=(), until: float | None = None) -> None:
    """Send one frame: ``header`` (JSON) then ``arrays`` (each C-ordered; declared in
    ``header["arrays"]`` as ``[dtype.str, shape]``). With ``until`` (a ``time.monotonic`` instant)
    the fd must be non-blocking and TimeoutError is raised past it; a closed reader raises _Ended."""
    arrays = [a if a.flags.c_contiguous else np.ascontiguousarray(a) for a in arrays]
    head = json.dumps({**header, "arrays": [_declare(a) for a in arrays]}).encode()
    parts = [MAGIC + struct.pack("<I", len(head)) + head] + [memoryview(a.reshape(-1).view(np.uint8))
                                                               for a in arrays if a.size]
    for part in parts:
        view = memoryview(part)
        while view.nbytes:
            if not _ready(fd, until, write=True):
                raise TimeoutError
            try:
                n = os.write(fd, view)
            except BlockingIOError:
                continue
            except (BrokenPipeError, OSError) as err:
                raise _Ended(str(err)) from None
            view = view[n:]


def _read_exact(fd: int, n: int, until: float | None) -> bytearray:
    buf = bytearray(n)
    view, got = memoryview(buf), 0
    while got < n:
        if not _ready(fd, until):
            raise TimeoutError
        try:
            k = os.readv(fd, [view[got:]])
        except BlockingIOError:
            continue
        except OSError as err:
            raise _Ended(str(err)) from None
        if k == 0:
            raise _Ended("end of file" if got == 0 else f"end of file after {got} of {n} bytes")
        got += k
    return buf


def read_frame(fd: int, until: float | None, max_payload: int) -> tuple[dict, list[np.ndarray]]:
    """One frame from ``fd``: (header dict, its arrays). Sizes are checked before anything is
    allocated: the header at most :data:`MAX_HEADER` bytes, the arrays together at most
    ``max_payload`` bytes; each array a plain numeric dtype, at most 8 dimensions. MalformedReply
    names the broken rule; TimeoutError past ``until``; _Ended when the writer closed the pipe."""
    prefix = _read_exact(fd, 8, until)
    if prefix[:4] != MAGIC:
        raise MalformedReply(f"frame must start with {MAGIC!r}; got {bytes(prefix)!r}")
    (size,) = struct.unpack("<I", prefix[4:])
    if size > MAX_HEADER:
        raise MalformedReply(f"header must be at most {MAX_HEADER} bytes; got {size}")
    try:
        header = json.loads(bytes(_read_exact(fd, size, until)))
    except (UnicodeDecodeError, ValueError) as err:
        raise MalformedReply(f"header is not JSON: {err}") from None
    if not isinstance(header, dict) or not isinstance(header.get("arrays"), list):
        raise MalformedReply("header must be a JSON object with an 'arrays' list")
    shapes, total = [], 0
    for item in header["arrays"]:
        if not (isinstance(item, list) and len(item) == 2 and isinstance(item[0], str) and _DTYPE.match(item[0])
                and isinstance(item[1], list) and len(item[1]) <= _MAX_NDIM
                and all(type(d) is int and d >= 0 for d in item[1])):
            raise MalformedReply(f"an array must be declared as [numeric dtype, shape of at most {_MAX_NDIM} "
                                 f"non-negative ints]; got {str(item)[:200]}")
        dtype = np.dtype(item[0])
        total += math.prod(item[1]) * dtype.itemsize
        if total > max_payload:
            raise MalformedReply(f"arrays must hold at most {max_payload} bytes for this call; got at least {total}")
        shapes.append((dtype, tuple(item[1])))
    payload = _read_exact(fd, total, until)
    arrays, at = [], 0
    for dtype, shape in shapes:
        n = math.prod(shape) * dtype.itemsize
        arrays.append(np.frombuffer(payload, dtype, math.prod(shape), at).reshape(shape))
        at += n
    return header, arrays


# ----------------------------------------------------------------------------------------------
# the child


def load_kernel(target: str):
    """The callable named by ``MODULE:FUNCTION`` (``MODULE`` importable, or a ``.py`` path).
    Imports the user's module: only ever called in the kernel's own process."""
    if target.count(":") != 1:
        raise FormatRuleError(f"kernel: must be MODULE:FUNCTION (e.g. my_kernels:marlin); got {target!r}")
    mod_name, func = target.split(":")
    try:
        if mod_name.endswith(".py"):
            spec = importlib.util.spec_from_file_location("_refsim_check_target", mod_name)
            module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)
        else:
            module = importlib.import_module(mod_name)
    except (ImportError, FileNotFoundError) as err:
        raise FormatRuleError(f"kernel: cannot import {mod_name!r}: {err}") from None
    except (Exception, SystemExit) as err:        # the module's own code failed or exited while loading
        raise FormatRuleError(f"kernel: importing {mod_name!r} raised {type(err).__name__}: {err}") from None
    kernel = getattr(module, func, None)
    if kernel is None:
        raise FormatRuleError(f"kernel: module {mod_name!r} has no attribute {func!r}")
    return kernel


def _kernel_of(request: dict):
    """The callable to run: an imported function, or a .cu/.ptx entry launched through refsim.ptx."""
    from refsim.testing.harness import _source_kernel

    path, _, entry = request["kernel"].rpartition(":")
    if path.endswith((".cu", ".ptx")):
        if request["launch"] is None:
            raise FormatRuleError(f"--launch: a CUDA/PTX kernel ({request['kernel']!r}) needs --launch MODULE:FUNCTION "
                                  f"returning a refsim.cuda.LaunchPlan; got none")
        return _source_kernel(path, entry, load_kernel(request["launch"]), request["arch"])
    if request["launch"] is not None:
        raise FormatRuleError(f"--launch: only for a .cu/.ptx kernel; got kernel {request['kernel']!r}")
    return load_kernel(request["kernel"])


def _parameters(kernel) -> list | None:
    try:
        params = inspect.signature(kernel).parameters.values()
    except (TypeError, ValueError):
        return None
    return [[p.name, int(p.kind), p.default is not p.empty] for p in params]


def _text(err: BaseException) -> str:
    try:
        return str(err)[:_TEXT]
    except BaseException:                     # a kernel's exception whose __str__ raises
        return "(its message cannot be printed)"


def _die_with_parent(parent: int) -> None:
    """Linux: SIGKILL this process when the parent ends, even by SIGKILL (prctl PR_SET_PDEATHSIG)."""
    if sys.platform.startswith("linux"):
        ctypes.CDLL(None, use_errno=True).prctl(1, int(signal.SIGKILL), 0, 0, 0)
    if os.getppid() != parent:
        os._exit(1)


def serve() -> None:
    """The kernel's process (``sys.argv[1]``: the parent's pid, ``sys.argv[2]``: the JSON request):
    read frames on fd 0, reply on fd 1 (both moved to private fds; the kernel's prints go to stderr)."""
    _die_with_parent(int(sys.argv[1]))
    inbox, outbox = os.dup(0), os.dup(1)
    os.dup2(os.open(os.devnull, os.O_RDONLY), 0)
    os.dup2(2, 1)
    sys.stdout = sys.stderr                   # the kernel's prints, unbuffered, where refsim check's progress goes
    request = json.loads(sys.argv[2])
    write_frame(outbox, {"kind": "started"})   # refsim is loaded: the import's deadline starts now
    try:
        kernel = _kernel_of(request)
    except (RefsimError, ToolchainError) as err:
        write_frame(outbox, {"kind": "refused", "text": " ".join(str(err).split())})
        os._exit(0)
    except OSError as err:
        write_frame(outbox, {"kind": "refused", "text": f"{err.filename or ''}: {err.strerror or err}"})
        os._exit(0)
    write_frame(outbox, {"kind": "ready", "params": _parameters(kernel)})
    try:
        _loop(kernel, inbox, outbox)
    except _Ended:
        pass
    os._exit(0)


def _loop(kernel, inbox: int, outbox: int) -> None:
    last = None                               # (the bytes call n received, the arrays its kernel got)
    before = set(threading.enumerate())
    while True:
        header, arrays = read_frame(inbox, None, 1 << 62)
        late = _late(last)
        if header["kind"] == "settle":
            deadline = time.monotonic() + SETTLE
            for t in set(threading.enumerate()) - before - {threading.current_thread()}:
                t.join(max(0.0, deadline - time.monotonic()))
            late = _late(last)
            write_frame(outbox, {"kind": "settled", "seq": header["seq"], "late": [i for i, _ in late]},
                        [a for _, a in late])
            continue
        received = [a.tobytes() for a in arrays]
        given = [np.frombuffer(bytearray(b), a.dtype).reshape(a.shape) for b, a in zip(received, arrays)]
        last = (received, given)
        reply = {"kind": "reply", "seq": header["seq"], "late": [i for i, _ in late]}
        out = []
        try:
            result = kernel(*given)
        except SystemExit as err:
            code = err.code if err.code is None or type(err.code) is int else _text(err)
            reply.update(status="exit", code=code)
        except BaseException as err:          # KeyboardInterrupt too: the kernel's, reported as raised
            reply.update(status="raised", type=type(err).__name__[:100], text=_text(err))
        else:
            if isinstance(result, np.ndarray) and _DTYPE.match(result.dtype.str) and result.ndim <= _MAX_NDIM:
                reply.update(status="ok")
                out = [result]
            else:
                what = (f"a numpy.ndarray of dtype {result.dtype} shape {result.shape}"
                        if isinstance(result, np.ndarray) else type(result).__name__)
                reply.update(status="returned", what=what[:200])
        changed = _late(last)
        reply["changed"] = [i for i, _ in changed]
        if changed:                           # later writes are those after the call returned
            last = ([a.tobytes() for a in given], given)
        write_frame(outbox, reply, out + [a for _, a in changed] + [a for _, a in late])


def _late(last) -> list:
    """(index, array) of each input of the last call whose array no longer holds the bytes received."""
    if last is None:
        return []
    return [(i, a.copy()) for i, (b, a) in enumerate(zip(*last)) if a.tobytes() != b]


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

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def _until(self):
        return None if self.deadline is None else time.monotonic() + self.deadline

    def _start(self) -> None:
        code = "import sys; from refsim.testing.sandbox import serve; serve()"
        self.child = subprocess.Popen([sys.executable, "-c", code, str(os.getpid()), json.dumps(self.request)],
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
        except _Ended:
            self._reap()
            why = f"the kernel's process {_ended(self.child.returncode)} while importing the kernel"
        except MalformedReply as err:
            why = f"the kernel's process sent a malformed message while importing the kernel: {err}"
        else:
            if header.get("kind") == "refused" and isinstance(header.get("text"), str):
                self.close()
                raise FormatRuleError(header["text"][:_TEXT])
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
        except _Ended:
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
        """After the last call: let the kernel's threads finish (up to :data:`SETTLE` s in the child),
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
