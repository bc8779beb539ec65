"""W4A16 GEMV cases for GPTQ and AWQ checkpoints (refsim's design, ``refsim/cuda/gptq_awq.cu``,
emulated by :mod:`refsim.emulator.gptq_awq_kernel`)::

    gptq, gptq_v2: kernel(x f16 (M,K), qweight i32 (K/8,N), qzeros i32 (G,N/8), scales f16 (G,N),
                          g_idx i32 (K,)) -> y f16 (M,N)
    awq:           kernel(x f16 (M,K), qweight i32 (K,N/8), qzeros i32 (G,N/8), scales f16 (G,N)) -> y f16 (M,N)

``gptq`` stores ``zero - 1`` (AutoGPTQ's v1 convention: the kernel reads ``field + 1``), ``gptq_v2``
stores ``zero``; AWQ stores ``zero`` in its interleaved nibble order (column ``8j + AWQ_ORDER[i]`` in
nibble i of word j) and its group size is K / G. The weight is ``fp16(q - z) * s`` (one fp16
multiply) and the sum runs per thread and column::

    slab b (rows 8b..8b+7): h = two 4-step hfma2 chains (even k in .x, odd k in .y)
                            acc = acc + float(h.x + h.y)          (fp16 add, then fp32 add)
    y[m, n] = fp16(acc)

Legality: :func:`refsim.emulator.gptq_awq_kernel.check_x` (1 <= M <= 8), the packers' own rules
(GPTQ: K % 32, N % 32; AWQ: N % 8; the group size divides K), act-order only with groups.
Probes cancel +X and -X (weight 1) next to v = 2^-2, which an fp16 sum at X = 2^10 loses and an
fp32 one keeps: inside one slab's .x chain (k 0, 2, 4) and across slabs (k 0, 8, 16).
"""

from __future__ import annotations

import numpy as np

from refsim.arith import fp
from refsim.emulator import gptq_awq_kernel as ek
from refsim.errors import FormatRuleError
from refsim.formats import awq, gptq
from refsim.testing.cases.base import DATA_KINDS, Format, Linear, Probe, int4_weights, keep_columns, values

_X, _V = 2.0**10, 2.0**-2
_MAX_GROUP_PROBES = 8          # each quantization group alone, for the first groups only
_MAX_NEIGHBOUR_BUGS = 4        # "group g's scales from g +- 1", for the first groups only


def _fp16_weights(q, z, s, g):
    """float16 (K, N) ``fp16(q - z[g]) * s[g]`` (one fp16 multiply, as the kernels dequantize) for
    codes q (K, N), zero points z (G, N) as the kernel reads them, scales s float16 (G, N), g (K,)."""
    diff = (q.astype(np.int32) - z.astype(np.int32)[g]).astype(np.float16)
    return s[g] * diff


def _fp16_across_slabs(x, W):
    """The slab partials added in an fp16 accumulator (the bug): float16 (M, N)."""
    slab = ek.slab_sums(x, W)                                          # (M, K/8, N) f16
    acc = np.zeros(slab[:, 0].shape, np.float16)
    for b in range(slab.shape[1]):
        acc = fp.f16_add(acc, slab[:, b])
    return acc


def _fp32_chain(x, W):
    """One fp32 FMA chain over k ascending, then fp16: float16 (M, N)."""
    xf, wf = fp.cvt_f16_to_f32(x), fp.cvt_f16_to_f32(W)
    acc = np.zeros((x.shape[0], W.shape[1]), np.float32)
    for k in range(W.shape[0]):
        acc = fp.f32_fma(xf[:, k, None], wf[None, k, :], acc, fused=True)
    return fp.cvt_f32_to_f16(acc)


class _W4A16Cases(Format):
    """What the GPTQ and AWQ formats share: the design's arithmetic, probes, bug classes of the
    accumulation and the group map. Subclasses say how the checkpoint stores q, z and the groups."""

    default_max_size = 1 << 22
    shape_fields = ("m", "k", "n", "group_size", "act_order")

    # --- the checkpoint: parts <-> inputs
    def parts(self, inputs):
        """``(x, q uint8 (K, N), z int (G, N) as the kernel must read them, s f16 (G, N), g (K,))``."""
        raise NotImplementedError

    def pack(self, x, q, z, s, g, case):
        """The kernel's inputs for these parts (the inverse of :meth:`parts`)."""
        raise NotImplementedError

    def cost(self, case):
        return case["m"] * case["k"] * case["n"]

    def legal(self, case):
        gs, k = case["group_size"], case["k"]
        if not 1 <= case["m"] <= ek.MAX_M:
            raise FormatRuleError(f"m: the GEMV serves 1..{ek.MAX_M} batch rows; got {case['m']}")
        if gs is not None and k % gs:
            raise FormatRuleError(f"group_size: must divide K={k}; got {gs}")
        if case["act_order"] and gs is None:
            raise FormatRuleError("act_order: needs groups (per-channel, every row is in group 0); got group_size=None")

    def regimes(self, case, sms):
        gs, k = case["group_size"], case["k"]
        out = {"one batch row" if case["m"] == 1 else "several batch rows",
               "per-channel (one group)" if gs is None else f"groups of {gs} ({gs // ek.SLAB} slabs each)",
               "several thread blocks (N > 128)" if case["n"] > 128 else "one thread block",
               "a long K (more than 64 slabs)" if k > 64 * ek.SLAB else "a short K"}
        if case["act_order"]:
            out.add("act-order g_idx (groups scattered over K)")
        return out | {f"plan branch {b}" for b in ek.plan_branches(case["m"], case["n"], k, gs, case["act_order"])}

    def make(self, case):
        rng = np.random.default_rng(case["seed"])
        k, n, gs = case["k"], case["n"], case["group_size"]
        q, s = int4_weights(rng, k, n, gs)
        z = rng.integers(self.lowest_zero, 16, s.shape)
        if case["act_order"]:
            g = np.empty(k, np.int32)
            g[rng.permutation(k)] = np.arange(k) // gs         # each group: gs rows scattered over K
        else:
            g = np.arange(k, dtype=np.int32) // (gs or k)
        x = values(rng, case["kind"], (case["m"], k)).astype(np.float16)
        return self.pack(x, q, z, s, g, case)

    def locate(self, case, inputs, idx, arch, sms):
        m, n = idx
        slabs = case["k"] // ek.SLAB
        return (f"y[{m}, {n}]: block {n // 128}, thread {n % 128} (one thread per column, every batch row); "
                f"{slabs} slabs of 8 rows in order, each two 4-step hfma2 chains added in fp16, then "
                f"acc += float(...) in fp32; y = fp16(acc)")

    def structure(self, case, inputs, shape, sms):
        rows, cols = np.indices(shape)
        return {"batch row": rows, "column mod 8 (nibble of a qzeros word)": cols % 8,
                "thread block (128 columns)": cols // 128, "column mod 32": cols % 32}

    # --- diagnosis
    def _unit_weights(self, inputs, terms, case):
        """Inputs whose activations are zero except ``terms`` ((k, value) pairs), at rows of weight
        exactly 1 (q = 8, z = 7, scale 1 in their groups)."""
        x, q, z, s, g = self.parts(inputs)
        x, q, z, s = np.zeros_like(x), q.copy(), z.copy(), s.copy()
        for k, v in terms:
            x[:, k] = v
            z[g[k]], s[g[k]] = 7, 1.0
        for k, _ in terms:
            q[k] = 8
        return self.pack(x, q, z, s, g, case)

    def probes(self, case, inputs):
        x, _, _, _, g = self.parts(inputs)
        out = [Probe("slab 0 only (k 0..7: the two hfma2 chains of one slab)",
                     (keep_columns(x, slice(0, ek.SLAB)),) + tuple(inputs[1:]),
                     "the dequantized weights of one slab or its two fp16 chains"),
               Probe("cancellation inside one slab (+X, v, -X at k 0, 2, 4: the .x chain)",
                     self._unit_weights(inputs, [(0, _X), (2, _V), (4, -_X)], case),
                     "the sum inside a slab: the design runs two fp16 hfma2 chains (X + v rounds to X); "
                     "an fp32 sum keeps v")]
        if case["k"] >= 3 * ek.SLAB:
            out.append(Probe("cancellation across slabs (+X, v, -X at k 0, 8, 16)",
                             self._unit_weights(inputs, [(0, _X), (8, _V), (16, -_X)], case),
                             "how slab partials are added: the design adds them in fp32 (keeps v); an fp16 "
                             "accumulator loses v"))
        for grp in range(min(int(g.max()) + 1, _MAX_GROUP_PROBES) if case["group_size"] else 0):
            out.append(Probe(f"group {grp} only ({int((g == grp).sum())} rows)",
                             (keep_columns(x, g == grp),) + tuple(inputs[1:]),
                             f"the weights, zero point or scale of quantization group {grp}",
                             family="quantization group"))
        return out

    def replay(self, weights=None, accumulate=ek.dequant_gemv):
        """``alt(inputs)``: the design with the weights ``weights(q, z, s, g)`` builds (fp16 (K, N))
        and the sum ``accumulate(x, W)``: a bug class replayed on any inputs (the case, a probe)."""
        weights = weights or _fp16_weights

        def alt(inputs):
            x, q, z, s, g = self.parts(inputs)
            return accumulate(x, weights(q, z, s, g))
        return alt

    def layout_bugs(self, case):
        """``(bug class, description, alt)`` of the checkpoint's layout (nibble order, zero points)."""
        return []

    def known_bugs(self, case, inputs, arch, sms):
        yield from self.layout_bugs(case)
        if case["act_order"]:
            gs = case["group_size"]
            yield ("act-order", "g_idx ignored: row k takes group k // group_size (the permutation of act-order "
                                "checkpoints not applied)",
                   self.replay(lambda q, z, s, g: _fp16_weights(q, z, s, np.arange(len(g)) // gs)))
            yield ("group index", "g_idx read once per slab: rows k0..k0+7 all take the group of row k0",
                   self.replay(lambda q, z, s, g: _fp16_weights(q, z, s, np.repeat(g[::ek.SLAB], ek.SLAB))))
        groups = inputs[3].shape[0]
        for grp, src in ([(t, t - 1) for t in range(1, groups)] + [(t, t + 1) for t in range(groups - 1)]):
            if grp < _MAX_NEIGHBOUR_BUGS:
                yield ("group index", f"group {grp}'s scales and zero points taken from group {src}",
                       self.replay(lambda q, z, s, g, grp=grp, src=src: _fp16_weights(q, z, s, np.where(g == grp, src, g))))
        yield ("fp16 accumulation", "the slab partials added in an fp16 accumulator instead of fp32",
               self.replay(accumulate=_fp16_across_slabs))
        yield ("another legitimate order (check it with mode='accuracy')",
               "one fp32 FMA chain over k ascending instead of refsim's design (fp16 hfma2 chains per slab, added "
               "in fp32)", self.replay(accumulate=_fp32_chain))

    def linear(self, case, inputs):
        """``y = x @ ((q - z) s)``: each weight dequantized to fp16 once (``pre=1``)."""
        x, q, z, s, g = self.parts(inputs)
        w = (q.astype(np.float64) - z.astype(np.float64)[g]) * s.astype(np.float64)[g]
        return Linear(x.astype(np.float64), w, terms=case["k"], pre=1)


class GPTQCases(_W4A16Cases):
    inputs = ("x", "qweight", "qzeros", "scales", "g_idx")
    fields = {"m": (1, 2, 4, 8), "k": (32, 64, 128, 256, 512, 1024, 2048, 4096, 11008),
              "n": (32, 64, 128, 256, 512, 1024, 4096, 11008), "group_size": (None, 128, 64, 32),
              "act_order": (False, True), "kind": DATA_KINDS, "seed": None}
    pinned_pool = tuple({"m": m, "k": k, "n": n, "group_size": gs, "act_order": ao} for m, k, n, gs, ao in
                        [(1, 32, 32, None, False), (1, 256, 64, 128, False), (2, 256, 32, 64, True),
                         (4, 512, 256, 32, True), (8, 1024, 32, 128, False)])

    def __init__(self, checkpoint_format: str):
        self.checkpoint_format = checkpoint_format
        self.name = "gptq" if checkpoint_format == "gptq" else "gptq_v2"
        self.lowest_zero = 1 if checkpoint_format == "gptq" else 0   # v1 cannot store a zero point of 0
        stored = "zero - 1 (v1: the kernel reads field + 1)" if checkpoint_format == "gptq" else "zero (v2)"
        self.signature = (f"kernel(x f16 (M,K), qweight i32 (K/8,N), qzeros i32 (G,N/8) storing {stored}, "
                          "scales f16 (G,N), g_idx i32 (K,)) -> y f16 (M,N)")

    def legal(self, case):
        super().legal(case)
        if case["k"] % 32 or case["n"] % 32:
            raise FormatRuleError(f"K, N: GPTQ packs 32 rows and 32 columns at a time; got K={case['k']}, N={case['n']}")

    def parts(self, inputs):
        x, qweight, qzeros, scales, g_idx = inputs
        k, n = x.shape[1], scales.shape[1]
        fields = gptq.unpack_qzeros(qzeros, 4, n, "gptq_v2")                 # the stored fields
        z = fields + 1 if self.checkpoint_format == "gptq" else fields
        return x, gptq.unpack_qweight(qweight, 4, k), z, scales, g_idx.astype(np.int64)

    def pack(self, x, q, z, s, g, case):
        ck = gptq.pack(q, s, np.asarray(z), 4, g_idx=np.asarray(g, np.int32), checkpoint_format=self.checkpoint_format)
        return x, ck.qweight, ck.qzeros, ck.scales, ck.g_idx

    def emulate(self, inputs, arch, sms):
        x, qweight, qzeros, scales, g_idx = inputs
        return ek.gptq_gemv(x, gptq.GPTQCheckpoint(qweight, qzeros, scales, g_idx, 4, self.checkpoint_format))

    def layout_bugs(self, case):
        def rows_reversed(q, z, s, g):                      # (K/8, 8, N): row k0 + e from nibble 7 - e
            return _fp16_weights(q.reshape(-1, ek.SLAB, q.shape[1])[:, ::-1].reshape(q.shape), z, s, g)

        def bytes_swapped(q, z, s, g):                      # (K/2, 2, N): the two rows of each byte swapped
            return _fp16_weights(q.reshape(-1, 2, q.shape[1])[:, ::-1].reshape(q.shape), z, s, g)

        shift = -1 if self.name == "gptq" else 1
        other = "without the +1 of the v1 convention (as gptq_v2)" if shift < 0 else "with the +1 of the v1 " \
            "convention (as gptq)"
        return [("nibble order", "the 8 rows of each qweight word read from the top nibble down (row k0 + e from "
                                 "nibble 7 - e)", self.replay(rows_reversed)),
                ("nibble order", "the two nibbles of every byte of qweight swapped", self.replay(bytes_swapped)),
                ("zero point off by one", f"qzeros read {other}",
                 self.replay(lambda q, z, s, g: _fp16_weights(q, z + shift, s, g)))]


class AWQCases(_W4A16Cases):
    name = "awq"
    signature = ("kernel(x f16 (M,K), qweight i32 (K,N/8), qzeros i32 (G,N/8), scales f16 (G,N)) -> y f16 (M,N) "
                 "(AWQ nibble order, group size K/G)")
    inputs = ("x", "qweight", "qzeros", "scales")
    fields = {"m": (1, 2, 4, 8), "k": (32, 64, 128, 256, 512, 1024, 2048, 4096, 11008),
              "n": (8, 16, 64, 128, 256, 512, 1024, 4096, 11008), "group_size": (None, 128, 64, 32),
              "act_order": (False,), "kind": DATA_KINDS, "seed": None}
    pinned_pool = tuple({"m": m, "k": k, "n": n, "group_size": gs, "act_order": False} for m, k, n, gs in
                        [(1, 32, 8, None), (1, 256, 64, 128), (4, 512, 256, 32), (8, 1024, 16, 64)])
    lowest_zero = 0

    def parts(self, inputs):
        x, qweight, qzeros, scales = inputs
        n = scales.shape[1]
        gs = x.shape[1] // scales.shape[0]
        return (x, awq.unpack_columns(qweight, n), awq.unpack_columns(qzeros, n), scales,
                np.arange(x.shape[1]) // gs)

    def pack(self, x, q, z, s, g, case):
        ck = awq.pack(q, s, np.asarray(z), case["group_size"])
        return x, ck.qweight, ck.qzeros, ck.scales

    def emulate(self, inputs, arch, sms):
        x, qweight, qzeros, scales = inputs
        return ek.awq_gemv(x, awq.AWQCheckpoint(qweight, qzeros, scales, x.shape[1] // scales.shape[0]))

    def layout_bugs(self, case):
        # a kernel that ignores the interleave reads column 8j + i from nibble i of word j, which
        # holds column 8j + AWQ_ORDER[i]
        def plain(a):                                      # (rows, N): the columns such a kernel sees
            n = a.shape[1]
            return a[:, (np.arange(n) // 8) * 8 + np.asarray(awq.AWQ_ORDER)[np.arange(n) % 8]]

        return [("nibble order", "AWQ's interleave ignored: column 8j + i read from nibble i of word j (qweight "
                                 "and qzeros)", self.replay(lambda q, z, s, g: _fp16_weights(plain(q), plain(z), s, g))),
                ("nibble order", "AWQ's interleave ignored in qweight only",
                 self.replay(lambda q, z, s, g: _fp16_weights(plain(q), z, s, g))),
                ("zero point off by one", "qzeros read as stored + 1 (GPTQ v1's convention)",
                 self.replay(lambda q, z, s, g: _fp16_weights(q, z + 1, s, g)))]
