"""Per-instruction semantics of PTX: one pure handler per opcode family, found through one table.

Spec
----
contract        ``lookup(Op, arch=)`` -> :class:`Handler`, called once per static instruction at load
                time; anything refsim does not execute exactly raises
                :class:`refsim.ptx.PtxUnsupportedError` whose message starts with the instruction text
                (``"div.approx.f32: ..."``). Handlers are pure: ``fn(*srcs) -> tuple of destinations``,
                elementwise over threads (``kind="alu"``) or over warps (``kind="warp"``).
values          a register value for T threads is a 1-D array of the *unsigned bit-pattern* dtype of
                the operand's width (16 -> uint16, 32 -> uint32, 64 -> uint64); predicates are bool.
                Signedness and float-ness live in the instruction type, never in the dtype.
                8-bit types (``cvt.s8``, ``cvt.u8``): results come as uint32 sign-/zero-extended to
                32 bits (the engine truncates to its register's width); 8-bit sources read the low
                8 bits of whatever unsigned array is given.
optional dsts   instructions with an optional second destination (``setp p|q``, ``shfl d|p``,
                ``lop3 d|p``) always return every destination; ``dst_types`` lists them all and the
                engine writes only those present in the instruction.
negated preds   a source written ``!p`` is negated by the engine before the call.
immediates      ``lop3``'s immLut, shift amounts and ``prmt`` selectors arrive as arrays like any source.
warp handlers   shfl ``fn(a, b, c, active) -> (d, p)``; vote/redux ``fn(a, active)``; ldmatrix ``fn(rows)``
                with ``src_types == ()`` (the address is the engine's); mma ``fn(a, b, c)`` with
                ``src_types`` = the A, B and C registers in operand order.
atomics         ``atom_apply(op, type, old, b, c=None, *, noftz=False, space="global")``: the keywords
                carry ``.noftz`` and the state space (``atom.add.f32`` flushes subnormals on global
                memory only).
extra API       :func:`mov_pack` / :func:`mov_unpack` for
                ``mov.b32 r, {h0, h1}`` and ``mov.b64 {lo, hi}, r`` (the operand shape is not in
                :class:`Op`), and :func:`atom_apply` for the atom/red arithmetic.
modules         handler.py (Op, Handler: the interface), table.py (the one opcode table, assembled
                from each family's BUILDERS), integer.py (integer arithmetic), logic.py (bit ops,
                shifts, lop3, prmt), compare.py (setp/selp/slct), floating.py (float arithmetic),
                convert.py (cvt), warp.py (shfl, vote, ldmatrix, mma, redux), atomic.py (atom_apply),
                move.py (mov pack/unpack), words.py (integer bit helpers), cexpr.py (the C-text
                helpers), expr.py (wrapped integer expressions). Families import handler.py, words.py,
                cexpr.py and expr.py only; nothing imports this package's __init__ from inside it.
C forms         each family defines an instruction once: its handler (``BUILDERS``) and beside it the C
                form the compiled executor emits (``C_FORMS``: opcode -> (modifiers the C reads,
                ``emit(op, srcs, operands) -> [(C expression, width)] or None``)); float forms pair
                their refsim.arith model with their C twin in ``floating.C_TWINS``; the plain wrapped
                integer forms (add/sub without .sat, integer abs/neg, mul.lo/mad.lo, and/or/xor/not/cnot
                on bit types, integer min/max, selp, setp's integer comparisons) are one :mod:`expr`
                expression from which both the NumPy function and the C derive. ``table.C_TABLE``
                assembles the C forms; refsim.ptx.compiled.alu only emits them.
source          PTX ISA 9.x (docs.nvidia.com/cuda/parallel-thread-execution), section named in each
                handler's ``isa`` field. Policy for implementation-defined results: docs/ptx_semantics.md.

Dispatch in a picture::

    "fma.rn.f16x2 %r1, %r2, %r3, %r4"  --engine parses-->  Op("fma", ("rn",), ("f16x2",))
        --lookup-->  Handler(fn=<fma f16x2 rn>, dst_types=("f16x2",), src_types=("f16x2",)*3,
                             kind="alu", isa="PTX ISA, Half Precision Floating Point Instructions: fma ...")
        --engine-->  d = fn(a, b, c)[0]   (uint32 arrays, one element per thread)
"""

from refsim.ptx.semantics.atomic import atom_apply
from refsim.ptx.semantics.handler import ARCHS, Handler, Op, isa
from refsim.ptx.semantics.move import mov_pack, mov_unpack
from refsim.ptx.semantics.table import lookup, supported_opcodes

__all__ = ["Op", "Handler", "lookup", "isa", "supported_opcodes", "mov_pack", "mov_unpack", "atom_apply",
           "ARCHS"]
