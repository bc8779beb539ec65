"""refsim.ptx.hopper.matrix: stmatrix through both executors (kernels of tests/ptx/kernels/hopper_stmatrix.cu,
compared with refsim.arith.fragments.ldmatrix_reference, the plain-loop reading of the ISA's fragment
sentence; refused forms and memory rules in small hand-written PTX)."""

from pathlib import Path

import numpy as np
import pytest

from conftest_compiled import needs_compiled, run_both
from refsim import ptx
from refsim.arith import fragments

pytestmark = needs_compiled

_KERNELS = ptx.Module((Path(__file__).parents[1] / "kernels" / "hopper_stmatrix.ptx").read_text())


def _registers():
    v = 4 * np.arange(32, dtype=np.uint32)[:, None] + np.arange(4, dtype=np.uint32)
    return ((2 * v) | ((2 * v + 1) << 16)) + 0x0100 * np.arange(4, dtype=np.uint32)     # (32, 4), the .cu's r_j


@pytest.mark.parametrize("num", [1, 2, 4])
@pytest.mark.parametrize("trans", [False, True])
def test_stmatrix_is_the_inverse_of_ldmatrix(num, trans):
    rows, regs = np.zeros(256, np.uint16), np.zeros(128, np.uint32)
    stats, arrays, _ = run_both(_KERNELS, f"stm_x{num}{'_trans' if trans else ''}", 1, 32, [rows, regs],
                                arch="sm_90a", race=True, poison=True)
    tile = arrays[0].reshape(32, 8)
    r = _registers()[:, :num]
    slots = 5 * np.arange(8 * num) % (8 * num)                       # row p of the block went to slot 5p
    matrices = tile[slots].reshape(num, 8, 8)
    assert np.array_equal(fragments.ldmatrix_reference(matrices, trans), r)
    assert (tile[8 * num:] == 0xFFFF).all()                          # nothing stored past the num matrices
    assert np.array_equal(arrays[1].reshape(32, 4)[:, :num], r)      # ldmatrix of the same form reads them back
    assert stats.opcodes[f"stmatrix.sync.aligned.m8n8.x{num}{'.trans' if trans else ''}.shared.b16"] == 1


def _hand(body: str, regs: str = "{%r3}", form: str = "stmatrix.sync.aligned.m8n8.x1.shared.b16") -> str:
    return f""".version 8.0
.target sm_90a
.address_size 64
.visible .entry k(.param .u64 pout)
{{
 .reg .b32 %r<8>; .reg .b64 %rd<8>; .reg .pred %p<4>;
 .shared .align 16 .b8 s[512];
 ld.param.u64 %rd1, [pout];
 mov.u32 %r1, %tid.x;
 mov.u32 %r2, s;
 mov.u32 %r3, %r1;
 {body}
 {form} [%r4], {regs};
 ret;
}}
"""


@pytest.mark.parametrize("body,cls,rule", [
    ("and.b32 %r5, %r1, 7;\n shl.b32 %r5, %r5, 4;\n add.u32 %r4, %r2, %r5;\n setp.lt.u32 %p1, %r1, 31;\n @!%p1 bra E;",
     ptx.PtxUnsupportedError, "stmatrix executed by a partial warp"),
    ("and.b32 %r5, %r1, 3;\n shl.b32 %r5, %r5, 4;\n add.u32 %r4, %r2, %r5;",
     ptx.PtxRaceError, "several threads write the same shared byte"),
    ("shl.b32 %r5, %r1, 3;\n add.u32 %r4, %r2, %r5;", ptx.PtxMisalignedError, "misaligned 16-byte .shared access"),
    ("shl.b32 %r5, %r1, 7;\n add.u32 %r4, %r2, %r5;", ptx.PtxMemoryError, "out-of-bounds 16-byte .shared access"),
])
def test_memory_rules_are_st_rules(body, cls, rule):
    text = _hand(body).replace(" ret;\n}", "E:\n ret;\n}")
    _, _, err = run_both(ptx.Module(text), "k", 1, 32, [np.zeros(4, np.uint32)], expect_error=True, arch="sm_90a",
                         race=True)
    assert type(err) is cls and rule in str(err) and "`stmatrix.sync.aligned.m8n8.x1.shared.b16 [%r4]" in str(err)


def test_an_unwritten_register_is_a_poison_error():
    text = _hand("shl.b32 %r5, %r1, 4;\n add.u32 %r4, %r2, %r5;", regs="{%r3, %r6}",
                 form="stmatrix.sync.aligned.m8n8.x2.shared.b16")
    _, _, err = run_both(ptx.Module(text), "k", 1, 32, [np.zeros(4, np.uint32)], expect_error=True, arch="sm_90a",
                         poison=True)
    assert isinstance(err, ptx.PtxUninitializedError) and "register %r6 read before written" in str(err)


def test_a_generic_address_outside_shared_memory_is_refused():
    text = _hand("cvt.u32.u64 %r4, %rd1;", form="stmatrix.sync.aligned.m8n8.x1.b16")
    _, _, err = run_both(ptx.Module(text), "k", 1, 32, [np.zeros(4, np.uint32)], expect_error=True, arch="sm_90a")
    assert isinstance(err, ptx.PtxMemoryError) and "outside shared memory" in str(err), str(err)


@pytest.mark.parametrize("form", ["stmatrix.sync.aligned.m16n8.x1.trans.shared.b8", "stmatrix.sync.m8n8.x1.shared.b16",
                                  "stmatrix.sync.aligned.m8n8.x2.shared.b16"])
def test_other_forms_are_refused_at_load(form):
    why = ptx.Module(_hand("mov.u32 %r4, %r2;", form=form)).unsupported["k"]
    assert "PTX line 13" in why and ("refsim executes stmatrix" in why or "takes 2 registers; got 1" in why), why
