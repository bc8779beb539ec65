"""refsim.ptx.semantics, the package: its public names are the modules' own, and the dispatch
picture of its spec (``fma.rn.f16x2`` from Op to bits) holds, worked by hand."""

from __future__ import annotations

import numpy as np

from refsim.ptx import semantics
from refsim.ptx.semantics import atomic, handler, move, table


def test_the_public_names_are_the_modules_objects():
    assert semantics.lookup is table.lookup and semantics.supported_opcodes is table.supported_opcodes
    assert semantics.Op is handler.Op and semantics.Handler is handler.Handler and semantics.isa is handler.isa
    assert semantics.mov_pack is move.mov_pack and semantics.mov_unpack is move.mov_unpack
    assert semantics.atom_apply is atomic.atom_apply and semantics.ARCHS is handler.ARCHS
    assert sorted(semantics.__all__) == sorted(["Op", "Handler", "lookup", "isa", "supported_opcodes", "mov_pack",
                                                "mov_unpack", "atom_apply", "ARCHS"])


def test_the_spec_picture_fma_rn_f16x2_from_op_to_bits():
    h = semantics.lookup(semantics.Op("fma", ("rn",), ("f16x2",)))
    assert (h.kind, h.dst_types, h.src_types) == ("alu", ("f16x2",), ("f16x2",) * 3)
    assert h.isa.startswith("PTX ISA, Half Precision Floating Point Instructions: fma")
    # high half: 1.0 * 2.0 + 0.5 = 2.5 (0x4100); low half: 2.0 * 3.0 + -1.0 = 5.0 (0x4500)
    a, b, c = (np.array([v], np.uint32) for v in (0x3C00_4000, 0x4000_4200, 0x3800_BC00))
    (d,) = h.fn(a, b, c)
    assert d.dtype == np.uint32 and d.tolist() == [0x4100_4500]
