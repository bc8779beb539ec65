"""refsim.native.build: the content-addressed C cache, on one-line C functions built into a temporary cache.

The cache key covers the source, the compiler and the flags: a changed source or ISA gets its own entry;
the id compiled into each library is checked on the file's bytes, so a stale or foreign file in an entry
is rebuilt, never used; a process that finds another building the same entry waits for it and reuses
its library; a missing compiler, a failing compile and a missing objdump are ToolchainErrors
naming what is missing or the compiler's own message. Each build is one tiny C file (well under a second).
"""

from __future__ import annotations

import ctypes
import shutil
import threading

import pytest

from refsim.errors import ToolchainError
from refsim.native import build as nb

pytestmark = pytest.mark.skipif(shutil.which("cc") is None and shutil.which("gcc") is None, reason="no C compiler")


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("REFSIM_CACHE", str(tmp_path))
    monkeypatch.delenv("CC", raising=False)
    return tmp_path / "native"


def test_cache_dir_follows_refsim_cache_else_the_home_cache(monkeypatch, tmp_path):
    monkeypatch.setenv("REFSIM_CACHE", str(tmp_path))
    assert nb.cache_dir() == tmp_path / "native"
    monkeypatch.delenv("REFSIM_CACHE")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert nb.cache_dir() == tmp_path / "home" / ".cache" / "refsim" / "native"


def test_compile_flags_never_allow_reassociation():
    assert nb.compile_flags("scalar", False) == ("-O2", "-fPIC", "-shared", "-std=gnu99", "-ffp-contract=off",
                                                 "-fno-fast-math")
    assert nb.compile_flags("avx2", True)[-3:] == ("-mavx2", "-mfma", "-fopenmp")
    assert not any("fast-math" in f and not f.startswith("-fno") for f in nb.compile_flags("avx2", True))


def test_a_missing_compiler_is_named(monkeypatch):
    monkeypatch.setenv("CC", "no-such-cc-refsim")
    with pytest.raises(ToolchainError, match=r"none of \['no-such-cc-refsim'\] found on PATH \(install gcc or set CC\)"):
        nb.find_compiler()


def test_build_caches_by_content_and_the_library_carries_its_key(cache):
    src = "int refsim_test_add3(int x) { return x + 3; }\n"
    path = nb.build(src, "scalar")
    assert path.name == "kernel.so" and path.parent.parent == cache
    key = path.parent.name
    assert len(key) == 64 and nb.entry_valid(path, key)
    lib = ctypes.CDLL(str(path))
    assert lib.refsim_test_add3(39) == 42
    assert nb.build(src, "scalar") == path                     # the same content: the same entry
    assert nb.build(src.replace("3;", "4;"), "scalar") != path  # another source: another entry
    assert nb.build(src, "avx2").parent.name != key            # other flags: another entry


def test_a_stale_entry_is_rebuilt_not_used(cache):
    src = "int refsim_test_seven(void) { return 7; }\n"
    path = nb.build(src, "scalar")
    key = path.parent.name
    path.write_bytes(b"\x7fELF not the library")               # an ELF header without the id
    assert not nb.entry_valid(path, key)
    assert nb.build(src, "scalar") == path and nb.entry_valid(path, key)
    assert not nb.entry_valid(cache / "absent.so", key)


def test_a_build_waits_for_the_entry_lock_and_reuses_what_its_holder_built(cache, monkeypatch):
    # two processes (pytest-xdist workers) needing the same library: the second waits on the entry's
    # lock and loads the first one's build instead of compiling the same source again
    src = "int refsim_test_locked(void) { return 11; }\n"
    cc, flags = nb.find_compiler(), nb.compile_flags("scalar", False)
    key = nb._key(src, cc, flags)
    entry = cache / key
    entry.mkdir(parents=True)
    compiled = []
    real_compile = nb._compile
    monkeypatch.setattr(nb, "_compile", lambda *a: (compiled.append(threading.current_thread().name), real_compile(*a)))
    got = []
    with nb._entry_lock(entry):
        waiter = threading.Thread(target=lambda: got.append(nb.build(src, "scalar")), name="waiter")
        waiter.start()
        waiter.join(0.5)
        assert waiter.is_alive() and not got             # blocked on the lock, not compiling beside us
        nb._compile(src, key, cc, flags, entry / "kernel.so")
    waiter.join()
    assert got == [entry / "kernel.so"] and compiled == ["MainThread"]
    assert ctypes.CDLL(str(got[0])).refsim_test_locked() == 11


def test_load_returns_the_library_checked_by_its_id(cache):
    lib = nb.load("int refsim_test_neg(int x) { return -x; }\n", "scalar")
    assert lib.refsim_test_neg(5) == -5
    lib.refsim_native_id.restype = ctypes.c_char_p
    assert len(lib.refsim_native_id().decode()) == 64


def test_a_failing_compile_raises_with_the_compilers_message(cache):
    with pytest.raises(ToolchainError, match=r"native: compiling failed \(exit \d+\):(.|\n)*refsim_test_broken"):
        nb.build("int refsim_test_broken(void) { return }\n", "scalar")
    # nothing half-written is left as the entry's library
    assert not list(cache.rglob("kernel.so"))


def test_objdump_lists_the_mnemonics_of_a_library(cache, monkeypatch):
    path = nb.build("int refsim_test_one(void) { return 1; }\n", "scalar")
    if shutil.which("objdump") is not None:
        assert "ret" in nb.objdump_mnemonics(path)
    monkeypatch.setenv("PATH", "")
    with pytest.raises(ToolchainError, match=r"objdump not found on PATH \(binutils\)"):
        nb.objdump_mnemonics(path)


def test_the_optimisation_level_is_a_named_choice_and_part_of_the_key(cache):
    from refsim.errors import FormatRuleError

    assert nb.compile_flags("scalar", False, "-O1") == ("-O1", "-fstrict-aliasing", *nb.compile_flags("scalar", False)[1:])
    src = "int refsim_test_level(void) { return 5; }\n"
    o1 = nb.build(src, "scalar", opt="-O1")
    assert o1 != nb.build(src, "scalar") and nb.load(src, "scalar", opt="-O1").refsim_test_level() == 5
    with pytest.raises(FormatRuleError, match=r"opt: must be one of \['-O2', '-O1'\]; got '-O3'"):
        nb.compile_flags("scalar", False, "-O3")
    with pytest.raises(FormatRuleError, match=r"opt: must be one of \['-O2', '-O1'\]; got '-Ofast'"):
        nb.load(src, "scalar", opt="-Ofast")


def test_openmp_must_be_a_bool():
    import numpy as np

    from refsim.errors import FormatRuleError

    with pytest.raises(FormatRuleError, match=r"openmp: must be True or False; got array"):
        nb.compile_flags("scalar", np.array([True, False]))
    with pytest.raises(FormatRuleError, match=r"openmp: must be True or False; got 'no'"):
        nb.load("int f(void) { return 0; }", "scalar", "no")
