"""Performance model: register search, MILP vs enumeration (the machine reading is tests/native/test_machine.py)."""

import pytest

from refsim.errors import FormatRuleError, ShapeError
from refsim.native import machine as MA
from refsim.qigen import model as MO


def _fake_machine(l1=32 * 1024, eta_avx2=True):
    return MA.MachineInfo(l1, 1 << 20, eta_avx2, eta_avx2, False, 16, 3e9, 1, {})


def test_register_search_reproduces_qigen_defaults_for_avx2():
    # feasible pairs with m_u | 8: (1,7)->7, (2,4)->8, (4,2)->8; the tie goes to the wider t_u
    assert MO.register_search(16, 4) == (2, 4)
    assert MO.register_search(16, 2) == (2, 4)
    mu, tu = MO.register_search(32, 4)
    assert mu + mu * tu + tu <= 32 and mu * tu >= 2 * 4
    with pytest.raises(FormatRuleError, match="eta"):
        MO.register_search(2, 4)


def test_l1_formula_by_hand():
    # 32*1024*1 + 4*1024*32 + 32*32*1 = 32768 + 131072 + 1024
    assert MO.l1_bits(1024, 32, 4, 1) == 164864
    assert MO.l1_bits(64, 16, 3, 4) == 32 * 64 * 4 + 3 * 64 * 16 + 32 * 16 * 4


@pytest.mark.parametrize("k,n,bits,batch,gs,threads,l1", [
    (4096, 4096, 4, 1, 128, 1, 32 * 1024),
    (11008, 4096, 3, 1, None, 1, 32 * 1024),
    (4096, 11008, 2, 4, 64, 2, 48 * 1024),
    (1024, 768, 4, 8, 32, 1, 16 * 1024),
])
def test_milp_finds_the_enumerated_optimum(k, n, bits, batch, gs, threads, l1):
    got = MO.cache_milp(k, n, bits, batch, l1 * 8, 32, threads, gs)
    want = MO.cache_bruteforce(k, n, bits, batch, l1 * 8, 32, threads, gs)
    assert got == want
    mb, tb = got
    assert k % mb == 0 and mb % 32 == 0 and (gs is None or mb % gs == 0)
    assert tb % 32 == 0 and (n // threads) % tb == 0
    assert MO.l1_bits(mb, tb, bits, batch) <= l1 * 8


def test_plan_for_llama_shape_fills_l1_and_explains_itself():
    p = MO.plan(4096, 4096, 4, _fake_machine(), group_size=128)
    assert (p.mu, p.tu_cols, p.mb, p.tb) == (2, 32, 1024, 32)  # derived by hand in test_l1_formula
    text = p.summary()
    assert "164864 <= 262144" in text and "mb=1024, tb=32" in text and "m_u=2, t_u=4" in text


def test_plan_rejects_impossible_shapes():
    with pytest.raises(ShapeError, match="tb"):
        MO.plan(4096, 36, 4, _fake_machine())
    with pytest.raises(FormatRuleError, match="L1"):
        MO.plan(4096, 4096, 4, _fake_machine(l1=64), group_size=128)


def test_predicted_time_napkin_math():
    est = MO.predict_time(4096, 4096, 4, 1, 32, None, mem_bytes_per_s=1e10, clock_hz=3e9)
    assert est.bytes_moved >= 4096 * 4096 // 2
    assert est.memory_s == pytest.approx(est.bytes_moved / 1e10)
    assert est.seconds == max(est.memory_s, est.compute_s)


def test_default_kernel_follows_detected_isa(monkeypatch):
    from refsim.qigen import kernel

    monkeypatch.setattr(kernel, "detect_isa", lambda: "scalar")
    assert kernel.default_spec(4).isa == "scalar"


def test_accumulator_search_by_hand():
    # eta = 16, t_u = 4: A*4 + 4 words + 2 <= 16 -> A = 2 (A = 4 needs 22); 3-bit keeps 2 words
    # per column vector live: 2*4 + 8 + 2 = 18 > 16 -> A = 1; t_u = 2: 4*2 + 2 + 2 = 12 -> A = 4
    assert MO.accumulator_search(16, 4, 4) == 2
    assert MO.accumulator_search(16, 4, 2) == 2
    assert MO.accumulator_search(16, 4, 3) == 1
    assert MO.accumulator_search(16, 2, 4) == 4
    assert MO.accumulator_search(16, 8, 4) == 1  # 8 + 8 + 2 > 16: even A = 1 does not fit, fall back
    assert MO.accumulator_search(32, 4, 4) == 2  # A*t_u <= 8 caps it on 32-register machines


def test_plan_reports_accumulators_and_accepts_a_fixed_one():
    p = MO.plan(4096, 4096, 4, _fake_machine(), group_size=128)
    assert p.accumulators == 2
    assert "A=2 partial sums per column" in p.summary()
    assert MO.plan(4096, 4096, 4, _fake_machine(), group_size=128, accumulators=1).accumulators == 1
    with pytest.raises(FormatRuleError, match="accumulators"):
        MO.plan(4096, 4096, 4, _fake_machine(), group_size=128, accumulators=3)


def test_predicted_latency_term_shrinks_with_accumulators():
    # latency-only regime: huge issue rate, infinite bandwidth -> compute = K*N/tu*4 cycles / A
    kw = dict(mem_bytes_per_s=1e30, clock_hz=1e9, issue_per_cycle=1e9)
    one = MO.predict_time(4096, 4096, 4, 1, 32, 128, **kw)
    two = MO.predict_time(4096, 4096, 4, 1, 32, 128, accumulators=2, **kw)
    assert one.compute_s == pytest.approx(4096 * 128 * 4 / 1e9)
    assert two.compute_s == pytest.approx(one.compute_s / 2)


def test_predicted_ops_by_path_count_the_per_code_work():
    # 4096 x 4096 4-bit, tu = 32: 512 chunks x 512 column vectors; per chunk 8 codes
    # prescaled: 8 x (and|srli + cvt + fma) + 1 load = 25; bitcast: 8 x (and + fma) + 2 loads = 18;
    # shift: 8 x (srli + and + cvt + fma) + 1 = 33; plus one broadcast per code and tile and the
    # per-group epilogue (the same for all paths)
    kw = dict(mem_bytes_per_s=1e10, clock_hz=3e9)
    ops = {p: MO.predict_time(4096, 4096, 4, 1, 32, 128, path=p, **kw).vector_ops for p in ("prescaled", "bitcast", "shift")}
    chunk_vecs = 512 * 512
    assert ops["prescaled"] - ops["bitcast"] == chunk_vecs * (25 - 18)
    assert ops["shift"] - ops["prescaled"] == chunk_vecs * (33 - 25)
    with pytest.raises(FormatRuleError, match="path"):
        MO.predict_time(4096, 4096, 4, 1, 32, 128, path="fast", **kw)


def test_compact_meta_must_be_a_bool():
    import numpy as np

    with pytest.raises(FormatRuleError, match=r"compact_meta: must be True or False; got array"):
        MO.predict_time(4096, 4096, 4, 1, 32, 128, mem_bytes_per_s=1e10, clock_hz=3e9, compact_meta=np.array([True, False]))
