"""The kernel's side of ``refsim check``'s sandbox (:mod:`refsim.testing.sandbox`): the wire format
and the loop of the kernel's process.

The kernel's process runs this file by its path (``runpy``), so it loads NumPy and refsim.errors
only, not the harness, before the user's module; a ``.cu``/``.ptx`` kernel loads refsim.ptx too.
It imports the user's module (and a ``--launch`` module), then answers each request on its fd 0
with one reply on its fd 1 (both moved to private fds first; fd 1 and ``sys.stdout`` then go to
stderr, so the kernel's prints never mix with the frames)::

    started                                refsim is loaded: the import's deadline starts
    ready {params}  |  refused {text}      the kernel's parameters (names, kinds), or a load error
    call n {inputs}  ->  reply n {status, output, changed, late}
    settle           ->  settled {late}    after waiting up to SETTLE s for the kernel's threads

A frame is ``b"RSK1"``, a little-endian u32 header length (at most :data:`MAX_HEADER` bytes), a
JSON header whose ``arrays`` declares each array as ``[dtype.str, shape]`` (a plain numeric dtype
``[<>|][biuf][1248]``, at most 8 dimensions), then the arrays' bytes in C order.
"""

from __future__ import annotations

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
import sys
import threading
import time

import numpy as np

from refsim.errors import CompileError, FormatRuleError, RefsimError, ToolchainError

__all__ = ["MalformedReply", "load_kernel", "read_frame", "write_frame", "serve", "MAX_HEADER", "SETTLE"]

MAGIC = b"RSK1"
#: the largest JSON header a frame may declare, in bytes
MAX_HEADER = 1 << 16
#: seconds the kernel's process waits, after the last call, for threads the kernel started (late writes)
SETTLE = 1.0
DTYPE = re.compile(r"[<>|][biuf][1248]\Z")
MAX_NDIM = 8
TEXT = 2000                                  # characters of a message from the kernel's process kept


class MalformedReply(Exception):
    """A frame that breaks the wire format (the reason is the message)."""


class Ended(Exception):
    """The other end closed the pipe (or the fd is gone)."""


# ----------------------------------------------------------------------------------------------
# frames


def _declare(x: np.ndarray) -> list:
    return [x.dtype.str, list(x.shape)]


def _ready(fd: int, until: float | None, write: bool = False) -> bool:
    """Whether ``fd`` can be read (written) before ``until``; Ended for a closed fd."""
    left = None if until is None else until - time.monotonic()
    if left is not None and left <= 0:
        return False
    try:
        r, w, _ = select.select([] if write else [fd], [fd] if write else [], [], left)
    except (OSError, ValueError) as err:
        raise Ended(str(err)) from None
    return bool(w if write else r)


def write_frame(fd: int, header: dict, arrays=(), until: float | None = None) -> None:
    """Send one frame: ``header`` (JSON) then ``arrays`` (each C-ordered; declared in
    ``header["arrays"]`` as ``[dtype.str, shape]``). With ``until`` (a ``time.monotonic`` instant)
    the fd must be non-blocking and TimeoutError is raised past it; a closed reader raises Ended."""
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
                raise Ended(str(err)) from None
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
            raise Ended(str(err)) from None
        if k == 0:
            raise Ended("end of file" if got == 0 else f"end of file after {got} of {n} bytes")
        got += k
    return buf


def read_frame(fd: int, until: float | None, max_payload: int) -> tuple[dict, list[np.ndarray]]:
    """One frame from ``fd``: (header dict, its arrays). Sizes are checked before anything is
    allocated: the header at most :data:`MAX_HEADER` bytes, the arrays together at most
    ``max_payload`` bytes; each array a plain numeric dtype, at most 8 dimensions. MalformedReply
    names the broken rule; TimeoutError past ``until``; Ended when the writer closed the pipe."""
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
        if not (isinstance(item, list) and len(item) == 2 and isinstance(item[0], str) and DTYPE.match(item[0])
                and isinstance(item[1], list) and len(item[1]) <= MAX_NDIM
                and all(type(d) is int and d >= 0 for d in item[1])):
            raise MalformedReply(f"an array must be declared as [numeric dtype, shape of at most {MAX_NDIM} "
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
        return str(err)[:TEXT]
    except BaseException:                     # a kernel's exception whose __str__ raises
        return "(its message cannot be printed)"


def _die_with_parent(parent: int) -> None:
    """Linux: SIGKILL this process when the parent ends, even by SIGKILL (prctl PR_SET_PDEATHSIG)."""
    if sys.platform.startswith("linux"):
        ctypes.CDLL(None, use_errno=True).prctl(1, int(signal.SIGKILL), 0, 0, 0)
    if os.getppid() != parent:
        os._exit(1)


def serve(parent: int, request_json: str) -> None:
    """The kernel's process (module docstring): ``parent`` is refsim check's pid, ``request_json``
    ``{"kernel": ..., "launch": ..., "arch": ...}``. Never returns (``os._exit``)."""
    _die_with_parent(parent)
    inbox, outbox = os.dup(0), os.dup(1)
    os.dup2(os.open(os.devnull, os.O_RDONLY), 0)
    os.dup2(2, 1)
    sys.stdout = sys.stderr                   # the kernel's prints, unbuffered, where refsim check's progress goes
    request = json.loads(request_json)
    write_frame(outbox, {"kind": "started"})   # refsim is loaded: the import's deadline starts now
    try:
        kernel = _kernel_of(request)
    except CompileError as err:                 # nvcc's diagnostics keep their lines (FILE(LINE): error: ...)
        write_frame(outbox, {"kind": "refused", "compile": True, "text": str(err)})
        os._exit(0)
    except (RefsimError, ToolchainError) as err:
        write_frame(outbox, {"kind": "refused", "text": " ".join(str(err).split())})
        os._exit(0)
    except OSError as err:
        write_frame(outbox, {"kind": "refused", "text": f"{err.filename or ''}: {err.strerror or err}"})
        os._exit(0)
    write_frame(outbox, {"kind": "ready", "params": _parameters(kernel)})
    try:
        _loop(kernel, inbox, outbox)
    except Ended:
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
            if isinstance(result, np.ndarray) and DTYPE.match(result.dtype.str) and result.ndim <= MAX_NDIM:
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


if __name__ == "__main__":                    # run by path: python -c "runpy.run_path(FILE)" FILE PARENT REQUEST
    serve(int(sys.argv[2]), sys.argv[3])
