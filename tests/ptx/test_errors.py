"""Every PtxError subclass, triggered by a tiny hand-written kernel (and the message names the place)."""

from __future__ import annotations

import numpy as np
import pytest

from refsim import ptx
from refsim.errors import RefsimError

HEAD = ".version 8.0\n.target sm_80\n.address_size 64\n"


def kernel(body: str, params: str = ".param .u64 p0", regs: str = "") -> ptx.Module:
    decl = (".reg .pred %p<4>;\n.reg .b32 %r<16>;\n.reg .b64 %rd<16>;\n" + regs)
    return ptx.Module(HEAD + f".visible .entry k({params})\n{{\n{decl}{body}\n}}\n")


LOAD_PTR = "ld.param.u64 %rd1, [p0];\ncvta.to.global.u64 %rd2, %rd1;\nmov.u32 %r1, %tid.x;\n"


def test_every_error_is_a_refsim_error():
    for cls in (ptx.PtxParseError, ptx.PtxUnsupportedError, ptx.PtxLaunchError, ptx.PtxMemoryError,
                ptx.PtxMisalignedError, ptx.PtxDeadlockError, ptx.PtxRaceError, ptx.PtxUninitializedError,
                ptx.PtxLimitError):
        assert issubclass(cls, ptx.PtxError) and issubclass(cls, RefsimError)


@pytest.mark.parametrize("text, where", [
    (HEAD + ".visible .entry k()\n{\n  add.u32 %r1, %r2;\n}\n", "line 6"),          # undeclared register
    (HEAD + ".visible .entry k()\n{\n .reg .b32 %r<3>;\n  add.u32 %r1, %r2, %r2\n}\n", "line 7"),  # no ';'
    (HEAD + ".visible .entry k()\n{\n  bra $L_nowhere;\n}\n", "line 6"),             # unknown label
    (HEAD + ".visible .entry k()\n{\n  ret;\n", "unbalanced"),                        # no closing brace
])
def test_malformed_ptx_names_the_line(text, where):
    with pytest.raises(ptx.PtxParseError, match=where):
        ptx.Module(text)


def test_an_unsupported_instruction_refuses_its_kernel_at_launch_naming_the_line():
    for body, fragment in (("tex.1d.v4.s32.s32 {%r1, %r2, %r3, %r4}, [%rd1, {%r5}];", r"line 9.*tex"),
                           ("call.uni foo, ();", "calls of non-inlined device functions"),
                           (".reg .v2 .b32 %v<2>;", "line 9.*vector or array registers")):
        m = kernel(body)
        assert set(m.unsupported) == {"k"}
        with pytest.raises(ptx.PtxUnsupportedError, match=f"kernel k cannot run in refsim.ptx: .*{fragment}"):
            m.launch("k", 1, 1, [np.zeros(1, np.int32)])


def test_the_other_kernels_of_a_module_still_run():
    text = (HEAD + ".visible .entry bad(.param .u64 p0)\n{\n.reg .b32 %r<4>;\n"
            "tex.1d.v4.s32.s32 {%r1, %r2, %r3, %r0}, [%r1, {%r2}];\n}\n"
            ".visible .entry also_bad()\n{\n.reg .b32 %r<4>;\n.pragma \"nounroll\";\n.maxnctapersm 2;\nret;\n}\n"
            ".visible .entry good(.param .u64 p0)\n{\n.reg .b32 %r<4>;\n.reg .b64 %rd<4>;\n"
            "ld.param.u64 %rd1, [p0];\ncvta.to.global.u64 %rd2, %rd1;\nmov.u32 %r1, WARP_SZ;\n"
            "st.global.u32 [%rd2], %r1;\n}\n")
    m = ptx.Module(text)
    assert m.kernels == ("bad", "also_bad", "good")
    assert set(m.unsupported) == {"bad", "also_bad"}
    assert "PTX line 7" in m.unsupported["bad"] and "tex" in m.unsupported["bad"]
    assert "PTX line 13" in m.unsupported["also_bad"] and "unsupported directive" in m.unsupported["also_bad"]
    out = np.zeros(1, np.int32)
    m.launch("good", 1, 1, [out])
    assert out[0] == 32                                              # WARP_SZ
    with pytest.raises(ptx.PtxUnsupportedError, match="kernel bad cannot run"):
        m.launch("bad", 1, 1, [out])
    m.unsupported.clear()                                            # a copy: the module still knows
    assert set(m.unsupported) == {"bad", "also_bad"}


def test_launch_argument_rules():
    m = kernel(LOAD_PTR + "st.global.u32 [%rd2], %r1;", ".param .u64 p0, .param .u32 p1")
    buf = np.zeros(4, np.int32)
    with pytest.raises(ptx.PtxLaunchError, match="takes 2 parameters; got 1"):
        m.launch("k", 1, 1, [buf])
    with pytest.raises(ptx.PtxLaunchError, match="0-d"):
        m.launch("k", 1, 1, [np.array(3), 1])
    with pytest.raises(ptx.PtxLaunchError, match=r"\[0, 4294967295\]; got -1"):
        m.launch("k", 1, 1, [buf, -1])
    with pytest.raises(ptx.PtxLaunchError, match="an int; got float"):
        m.launch("k", 1, 1, [buf, 1.5])
    with pytest.raises(ptx.PtxLaunchError, match="C-contiguous"):
        m.launch("k", 1, 1, [np.zeros((4, 4), np.int32)[:, 1], 0])
    with pytest.raises(ptx.PtxLaunchError, match="kernel: must be one of"):
        m.launch("nope", 1, 1, [buf, 0])
    with pytest.raises(ptx.PtxLaunchError, match="block"):
        m.launch("k", 1, (1025,), [buf, 0])
    with pytest.raises(ptx.PtxLaunchError, match="166912 bytes per block on sm_80; got 200000"):
        m.launch("k", 1, 1, [buf, 0], shared_bytes=200_000)
    with pytest.raises(ptx.PtxLaunchError, match="cannot run on sm_75"):
        m.launch("k", 1, 1, [buf, 0], arch="sm_75")


def test_f32_value_parameter_must_be_exact():
    m = kernel("ret;", ".param .f32 p0")
    m.launch("k", 1, 1, [0.5])
    with pytest.raises(ptx.PtxLaunchError, match="not exactly representable"):
        m.launch("k", 1, 1, [0.1])


def test_out_of_bounds_global_store_names_thread_and_address():
    m = kernel(LOAD_PTR + "mul.wide.u32 %rd3, %r1, 4;\nadd.s64 %rd4, %rd2, %rd3;\nst.global.u32 [%rd4], %r1;")
    buf = np.zeros(40, np.int32)
    m.launch("k", 1, 40, [buf])
    assert (buf == np.arange(40)).all()
    with pytest.raises(ptx.PtxMemoryError, match=r"out-of-bounds.*thread \(40, 0, 0\)"):
        m.launch("k", 1, 41, [np.zeros(40, np.int32)])


def test_out_of_bounds_shared_access():
    m = ptx.Module(HEAD + ".visible .entry k()\n{\n.reg .b32 %r<4>;\n.shared .align 4 .b8 s[64];\n"
                   "mov.u32 %r1, %tid.x;\nshl.b32 %r2, %r1, 2;\nmov.u32 %r3, s;\nadd.s32 %r2, %r2, %r3;\n"
                   "st.shared.u32 [%r2], %r1;\n}\n")
    m.launch("k", 1, 16, [])
    with pytest.raises(ptx.PtxMemoryError, match=r"\.shared.*block has 64 bytes"):
        m.launch("k", 1, 17, [])


def test_misaligned_vector_load():
    m = kernel(LOAD_PTR + "ld.global.v2.u32 {%r2, %r3}, [%rd2+4];")
    with pytest.raises(ptx.PtxMisalignedError, match="misaligned 8-byte"):
        m.launch("k", 1, 1, [np.zeros(8, np.int32)])


def test_deadlock_at_a_barrier_that_cannot_complete():
    m = kernel("bar.sync 1, 64;")
    with pytest.raises(ptx.PtxDeadlockError, match=r"barrier.*block \(0, 0, 0\) at line 9"):
        m.launch("k", 1, 32, [np.zeros(1, np.int32)])


def test_deadlock_spinning_on_a_flag_nobody_sets():
    m = kernel(LOAD_PTR + "$L_spin:\nld.volatile.global.u32 %r2, [%rd2];\nsetp.eq.s32 %p1, %r2, 0;\n"
               "@%p1 bra $L_spin;")
    with pytest.raises(ptx.PtxDeadlockError, match=r"spins.*block \(1, 0, 0\)"):
        m.launch("k", 2, 32, [np.zeros(1, np.int32)])


def test_runaway_kernel_hits_max_warp_instructions():
    m = kernel("$L_loop:\nadd.s32 %r1, %r1, 1;\nbra $L_loop;")
    with pytest.raises(ptx.PtxLimitError, match="max_warp_instructions=1000"):
        m.launch("k", 1, 32, [np.zeros(1, np.int32)], max_warp_instructions=1000)


SHARED_PAIR = (HEAD + ".visible .entry k()\n{\n.reg .b32 %r<6>;\n.shared .align 4 .b8 s[256];\n"
               "mov.u32 %r1, %tid.x;\nshl.b32 %r2, %r1, 2;\nmov.u32 %r3, s;\nadd.s32 %r2, %r2, %r3;\n"
               "st.shared.u32 [%r2], %r1;\n{BARRIER}ld.shared.u32 %r4, [%r2+4];\n}\n")


def test_race_checker_reports_a_read_of_another_threads_write_between_barriers():
    racy = ptx.Module(SHARED_PAIR.replace("{BARRIER}", ""))
    racy.launch("k", 1, 32, [])                     # no checking: runs
    with pytest.raises(ptx.PtxRaceError, match="written by"):
        racy.launch("k", 1, 32, [], race=True)
    ptx.Module(SHARED_PAIR.replace("{BARRIER}", "bar.sync 0;\n")).launch("k", 1, 32, [], race=True)


def test_race_checker_reports_a_cp_async_destination_read_before_its_wait():
    text = (HEAD + ".visible .entry k(.param .u64 p0)\n{\n.reg .b32 %r<6>;\n.reg .b64 %rd<4>;\n"
            ".shared .align 16 .b8 s[16];\nld.param.u64 %rd1, [p0];\ncvta.to.global.u64 %rd2, %rd1;\n"
            "mov.u32 %r1, s;\ncp.async.cg.shared.global [%r1], [%rd2], 16;\ncp.async.commit_group;\n"
            "{WAIT}ld.shared.u32 %r2, [%r1];\nst.global.u32 [%rd2], %r2;\n}\n")
    x = np.arange(4, dtype=np.int32) + 5
    with pytest.raises(ptx.PtxRaceError, match="before its wait_group"):
        ptx.Module(text.replace("{WAIT}", "")).launch("k", 1, 1, [x.copy()], race=True)
    y = np.zeros(4, np.int32)
    ptx.Module(text.replace("{WAIT}", "")).launch("k", 1, 1, [y])
    assert y[0] == 0                                 # without the wait the copy has not landed
    y = x.copy()
    ptx.Module(text.replace("{WAIT}", "cp.async.wait_group 0;\n")).launch("k", 1, 1, [y], race=True)
    assert y[0] == 5


def test_poison_reports_uninitialised_register_and_shared_reads():
    m = kernel(LOAD_PTR + "add.s32 %r3, %r2, 1;\nst.global.u32 [%rd2], %r3;")
    m.launch("k", 1, 1, [np.zeros(1, np.int32)])
    with pytest.raises(ptx.PtxUninitializedError, match="register %r2"):
        m.launch("k", 1, 1, [np.zeros(1, np.int32)], poison=True)
    sh = ptx.Module(SHARED_PAIR.replace("{BARRIER}", "bar.sync 0;\n"))
    with pytest.raises(ptx.PtxUninitializedError, match="shared memory read before written"):
        sh.launch("k", 1, 32, [], poison=True)      # thread 31 reads s[32], never written
    sh.launch("k", 1, 32, [])


def test_a_counting_loop_over_an_unchanging_volatile_value_is_not_a_deadlock():
    m = kernel(LOAD_PTR + "mov.u32 %r3, 0;\nmov.u32 %r4, 0;\n$L_loop:\nld.volatile.global.u32 %r2, [%rd2];\n"
               "add.s32 %r4, %r4, %r2;\nadd.s32 %r3, %r3, 1;\nsetp.lt.u32 %p1, %r3, 200;\n@%p1 bra $L_loop;\n"
               "st.global.u32 [%rd2+4], %r4;")
    buf = np.array([3, 0], np.int32)
    m.launch("k", 1, 32, [buf])
    assert buf.tolist() == [3, 600]


# ---------------------------------------------------------------------------------------------
# limits: named errors with the numbers, before anything is allocated (refsim/ptx/limits.py)


@pytest.mark.parametrize("decl, match", [
    (".reg .b32 %r<1000000000>;", r"kernel k, PTX line 6: registers per kernel: at most 262,144; got 1,000,000,000"),
    (".shared .b8 s[1099511627776];", r"static .shared bytes per kernel: at most 49,152; got 1,099,511,627,776"),
    (".local .b8 l[1099511627776];", r"\.local bytes per thread: at most 524,288; got 1,099,511,627,776"),
])
def test_declarations_beyond_the_limits_are_named_before_allocating(decl, match):
    with pytest.raises(ptx.PtxLimitError, match=match):
        ptx.Module(HEAD + f".visible .entry k()\n{{\n{decl}\nret;\n}}\n")


def test_module_variables_beyond_the_limits_and_zero_globals_allocated_per_launch():
    from refsim.ptx.parse import parse

    with pytest.raises(ptx.PtxLimitError, match=r"module .global bytes: at most 1,073,741,824; got 1,099,511,627,776"):
        ptx.Module(HEAD + ".global .align 4 .b8 g[1099511627776];\n.visible .entry k()\n{\nret;\n}\n")
    with pytest.raises(ptx.PtxLimitError, match=r"module .const bytes: at most 65,536; got 65,540"):
        ptx.Module(HEAD + ".const .align 4 .u32 c[16385];\n.visible .entry k()\n{\nret;\n}\n")
    big = parse(HEAD + ".global .align 4 .b8 g[1073741824];\n.visible .entry k()\n{\nret;\n}\n")
    assert big.globals["g"][1] is None                         # nothing allocated at parse


def test_parameters_beyond_32764_bytes_are_refused_and_many_parse_in_linear_time():
    from refsim.ptx.parse import parse

    fits = ", ".join(f".param .u32 p{i}" for i in range(8191))            # 32,764 bytes exactly
    assert len(ptx.Module(HEAD + f".visible .entry k({fits})\n{{\nret;\n}}\n").params("k")) == 8191
    many = ",\n".join(f".param .u32 p{i}" for i in range(100_000))
    with pytest.raises(ptx.PtxLimitError, match=r"parameter bytes per kernel: at most 32,764; got 32,768"):
        parse(HEAD + f".visible .entry k(\n{many}\n)\n{{\nret;\n}}\n")


@pytest.mark.slow
def test_a_hundred_thousand_instructions_parse():
    from refsim.ptx.parse import parse

    text = HEAD + ".visible .entry k()\n{\n.reg .b32 %r<4>;\n" + "add.s32 %r1, %r1, 1;\n" * 100_000 + "}\n"
    assert len(parse(text).kernels["k"].instructions) == 100_001


def test_a_grid_whose_least_work_exceeds_the_budget_is_refused_at_once():
    m = kernel("ret;")
    with pytest.raises(ptx.PtxLimitError, match=r"grid x block: 2,147,483,647 blocks of 32 warps issue at least "
                                                r"68,719,476,704 warp-instructions, more than max_warp_instructions="
                                                r"1,000,000,000"):
        m.launch("k", 2**31 - 1, 1024, [np.zeros(1, np.int32)])
    with pytest.raises(ptx.PtxLimitError, match="max_warp_instructions=10"):
        m.launch("k", 11, 32, [np.zeros(1, np.int32)], max_warp_instructions=10)
    m.launch("k", 10, 32, [np.zeros(1, np.int32)], max_warp_instructions=10)


def test_launch_state_beyond_the_limit_is_refused_before_allocating():
    m = ptx.Module(HEAD + ".visible .entry k()\n{\n.reg .b64 %rd<200000>;\nret;\n}\n")
    with pytest.raises(ptx.PtxLimitError, match=r"kernel k: launch state bytes .*: at most 8,589,934,592; got "
                                                r"104,857,600,000"):
        m.launch("k", 64, 1024, [])


def test_a_pointer_three_bytes_off_its_alignment_faults_as_on_the_gpu():
    m = kernel(LOAD_PTR + "st.global.u32 [%rd2], %r1;")
    raw = np.zeros(16, np.uint8)
    m.launch("k", 1, 1, [raw[4:8]])                             # 4 bytes in: aligned
    with pytest.raises(ptx.PtxMisalignedError, match=r"misaligned 4-byte .global access at address 0x[0-9a-f]*3 "):
        m.launch("k", 1, 1, [raw[3:7]])


@pytest.mark.parametrize("kw, match", [
    (dict(seed=-1), "seed: must be a non-negative int; got -1"),
    (dict(seed="x"), "seed: must be a non-negative int; got 'x'"),
    (dict(seed=True), "seed: must be a non-negative int; got True"),
    (dict(max_warp_instructions=True), "max_warp_instructions: must be a positive int or None; got True"),
    (dict(max_warp_instructions=0), "max_warp_instructions: must be a positive int or None; got 0"),
    (dict(race=1), "race: must be True or False; got 1"),
    (dict(poison="yes"), "poison: must be True or False; got 'yes'"),
    (dict(schedule=["lockstep"]), "schedule: must be one of"),
    (dict(arch=80), "arch: must be one of"),
    (dict(shared_bytes=True), "shared_bytes: must be a non-negative int; got True"),
])
def test_every_launch_keyword_is_validated(kw, match):
    m = kernel("ret;")
    with pytest.raises(ptx.PtxLaunchError, match=match):
        m.launch("k", 1, 1, [np.zeros(1, np.int32)], **kw)
    with pytest.raises(ptx.PtxLaunchError, match="kernel: must be a str"):
        m.launch(["k"], 1, 1, [np.zeros(1, np.int32)])


@pytest.mark.parametrize("text, cls, match", [
    (HEAD.replace("sm_80", "sm_999"), ptx.PtxUnsupportedError, r"\.target sm_999: refsim models architectures up to sm_120"),
    (HEAD.replace("sm_80", "sm_100a"), ptx.PtxUnsupportedError,
     r"\.target sm_100a: an architecture-specific target refsim does not model \(it knows sm_90a, sm_120a\)"),
    (HEAD.replace("sm_80", "compute_80"), ptx.PtxParseError, "malformed .target"),
    (HEAD.replace("8.0", "99.0"), ptx.PtxUnsupportedError, "PTX ISA version 99.0: refsim reads versions 1.0 to 9.x"),
    (HEAD.replace("8.0", "eight"), ptx.PtxParseError, "malformed .version"),
    (HEAD.replace("64", "48"), ptx.PtxParseError, ".address_size must be 32 or 64"),
    (HEAD + ".visible .entry k()\n{\nret;\n}\n.visible .entry k()\n{\nret;\n}\n", ptx.PtxParseError,
     r"PTX line 8.*\.entry k is defined twice \(first at PTX line 4\)"),
])
def test_module_headers_and_duplicate_entries_are_named_errors(text, cls, match):
    if ".entry" not in text:
        text += ".visible .entry k()\n{\nret;\n}\n"
    with pytest.raises(cls, match=match):
        ptx.Module(text)


def test_a_message_is_worded_from_its_one_template():
    from refsim.ptx.errors import error, message, waiting

    assert message("trap", who="block (0, 0, 0) thread (3, 0, 0)") == "trap executed by block (0, 0, 0) thread (3, 0, 0)"
    e = error("race_same_byte", "kernel k, PTX line 9", offset=0x1F)
    assert type(e) is ptx.PtxRaceError
    assert str(e) == "kernel k, PTX line 9: several threads write the same shared byte (0x1f) in one instruction"
    e = error("limit", kernel="k", limit=10, line=7, text="bra L;")
    assert type(e) is ptx.PtxLimitError
    assert str(e) == "kernel k: more than max_warp_instructions=10 warp-instructions (at PTX line 7 `bra L;`)"
    assert waiting(["a", "b"]) == "a; b"
    assert waiting([str(i) for i in range(10)]) == "0; 1; 2; 3; 4; 5; 6; 7; ... (10 blocks)"


def test_no_module_restates_a_message_of_the_table():
    """Each MESSAGES template is written once: the longest literal text between its fields appears in no other
    module of refsim.ptx (the interpreter's raise sites and the compiled runner both call the table)."""
    import ast
    import re
    from pathlib import Path

    from refsim.ptx.errors import MESSAGES

    def strings(path: Path) -> str:                  # the string constants of the code, docstrings left out
        tree = ast.parse(path.read_text(encoding="utf-8"))
        docs = {id(n.body[0].value) for n in ast.walk(tree)
                if isinstance(n, (ast.Module, ast.ClassDef, ast.FunctionDef)) and n.body
                and isinstance(n.body[0], ast.Expr) and isinstance(n.body[0].value, ast.Constant)}
        return "\n".join(n.value for n in ast.walk(tree)
                         if isinstance(n, ast.Constant) and isinstance(n.value, str) and id(n) not in docs)

    root = Path(ptx.__file__).parent
    sources = {p: strings(p) for p in root.rglob("*.py") if p.name != "errors.py"}
    for name, (_, template) in MESSAGES.items():
        piece = max(re.split(r"\{[^}]*\}", template), key=len)        # its longest literal stretch
        assert len(piece.strip()) >= 8, name
        again = [str(p.relative_to(root)) for p, text in sources.items() if piece in text]
        assert not again, f"MESSAGES[{name!r}] text {piece!r} restated in {again}"
