"""``refsim qigen``: the QIGen model's plan for one layer on this machine, optionally timed.

    refsim qigen --k 4096 --n 4096 --bits 4 [--group-size 128] [--batch 1] [--threads 1] [--run]

Prints the machine (L1d, L2, ISA, registers with where each came from), the register and L1
choices with their constraint arithmetic, the predicted time, and with ``--run`` builds the
generated kernel, checks it against the oracle on a slice and times it.
"""

from __future__ import annotations

from refsim.commands import positive_int, positive_float  # noqa: F401


def register(subparsers) -> None:
    p = subparsers.add_parser("qigen", help="QIGen CPU kernel plan (cache/register model) for one layer",
                              description="Choose m_u, t_u (register search) and mb, tb (MILP) for this CPU.")
    p.add_argument("--k", type=positive_int, required=True, help="input features, the reduction (K)")
    p.add_argument("--n", type=positive_int, required=True, help="output features (N)")
    p.add_argument("--bits", type=int, required=True, choices=(2, 3, 4))
    p.add_argument("--group-size", type=positive_int, default=None, help="group size along K (omit: per-channel)")
    p.add_argument("--batch", type=positive_int, default=1)
    p.add_argument("--threads", type=positive_int, default=1)
    p.add_argument("--mem-gbs", type=positive_float, default=10.0, help="memory bandwidth for the prediction, GB/s")
    p.add_argument("--run", action="store_true", help="build, verify and time the generated kernel")
    p.set_defaults(func=_run)


def _run(args) -> int:
    import time

    import numpy as np

    from refsim.qigen import model
    from refsim.native.machine import detect_isa, machine_info

    info = machine_info()
    print(f"machine: L1d {info.l1d_bytes} B ({info.provenance['l1d_bytes']}), L2 {info.l2_bytes} B "
          f"({info.provenance['l2_bytes']}), avx2={info.avx2} fma={info.fma} avx512f={info.avx512f} "
          f"({info.provenance['isa']}), generated ISA {detect_isa()}")
    p = model.plan(args.k, args.n, args.bits, info, batch=args.batch, group_size=args.group_size,
                   threads=args.threads)
    print(p.summary())
    est = model.predict_time(args.k, args.n, args.bits, args.batch, p.tu_cols, args.group_size,
                             args.mem_gbs * 1e9, info.clock_hz, accumulators=p.accumulators)
    print(f"  predicted: {est.seconds * 1e3:.3f} ms ({est.bound}-bound: {est.bytes_moved} B at "
          f"{args.mem_gbs} GB/s = {est.memory_s * 1e3:.3f} ms; {est.vector_ops} vector ops = "
          f"{est.compute_s * 1e3:.3f} ms)")
    if args.run:
        from refsim.formats import gptq
        from refsim.qigen import codegen, kernel, oracle

        rng = np.random.default_rng(0)
        gs = args.group_size or args.k
        q = rng.integers(0, 2**args.bits, (args.k, args.n), dtype=np.uint8)
        s = (rng.random((args.k // gs, args.n)) * 0.01).astype(np.float32)
        z = np.full((args.k // gs, args.n), 2 ** (args.bits - 1), dtype=np.float32)
        x = rng.standard_normal((args.batch, args.k)).astype(np.float32)
        mat = kernel.prepare(gptq.pack_qweight(q, args.bits), s, z, bits=args.bits,
                             group_size=args.group_size, mb=p.mb, tb=p.tb)
        spec = codegen.KernelSpec(args.bits, tu=p.tu_cols, unroll=p.mu, isa=detect_isa(),
                                  openmp=args.threads > 1, accumulators=p.accumulators,
                                  prefetch=detect_isa() == "avx2")
        y = kernel.qgemv(x, mat, spec)
        cols = slice(0, min(args.n, 32))
        ref = oracle.qgemv_oracle(x, q[:, cols].copy(), s[:, cols].copy(), z[:, cols].copy(), None,
                                  args.bits, args.group_size, unroll=spec.unroll,
                                  accumulators=spec.accumulators)
        exact = bool(np.array_equal(y[:, cols].view(np.uint32), ref.view(np.uint32)))
        best = float("inf")
        for _ in range(20):
            t0 = time.perf_counter()
            kernel.qgemv(x, mat, spec)
            best = min(best, time.perf_counter() - t0)
        print(f"  measured: {best * 1e3:.3f} ms ({spec.name}); first {cols.stop} columns bit-exact vs oracle: {exact}")
        return 0 if exact else 1
    return 0
