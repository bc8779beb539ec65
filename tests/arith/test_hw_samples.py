"""refsim.arith.hw_samples: the committed hardware measurements decode to the raw bits stored in the
files (read here with plain np.load), and a missing, truncated or mistyped file is a named error."""

from __future__ import annotations

import numpy as np
import pytest

from refsim.arith import hw_samples as hw
from refsim.errors import FormatRuleError


def test_fp16_blocks_are_the_stored_bits_viewed_as_floats():
    rows = hw.load(hw.subset_path())
    assert sorted(rows) == sorted(gpu for gpu, _ in hw.GPUS)
    with np.load(hw.subset_path()) as raw:
        for gpu, r in rows.items():
            assert r.a.dtype == np.float16 and r.b.dtype == np.float16 and r.c.dtype == np.float32
            assert np.array_equal(r.a.view(np.uint16), raw[f"{gpu}_a_f16bits"])
            assert np.array_equal(r.b.view(np.uint16), raw[f"{gpu}_b_f16bits"])
            assert np.array_equal(r.c.view(np.uint32), raw[f"{gpu}_c_f32bits"])
            assert np.array_equal(r.d32.view(np.uint32), raw[f"{gpu}_d_fp32_as_f32bits"])
            # the fp16 results were stored as fp32 bits of fp16 values: widening them back is exact
            assert r.d16.dtype == np.float16
            assert np.array_equal(r.d16.astype(np.float32).view(np.uint32), raw[f"{gpu}_d_fp16_as_f32bits"])
            assert r.a.shape == r.b.shape and r.c.shape == r.d32.shape == r.d16.shape == r.a.shape[:1]


def test_available_path_is_the_committed_subset():
    assert hw.available_path() == hw.subset_path()
    assert hw.subset_path().is_file()


def test_probes_carry_every_kernel_with_tiles_in_categories_of_sixteen():
    probes = hw.load_probes()
    assert sorted(probes) == sorted(hw.PROBES)
    with np.load(hw.probes_path()) as raw:
        for kernel, p in probes.items():
            assert p.D.dtype == np.float32
            assert np.array_equal(p.D.view(np.uint32), raw[f"{kernel}/D_f32"].view(np.uint32))  # NaNs by bits
            tiles = p.A.shape[0]
            assert p.C.shape == p.D.shape == (tiles, 16, 8)
            assert list(p.category) == [j // 16 for j in range(tiles)]


def test_a_missing_file_is_named(tmp_path):
    missing = tmp_path / "absent.npz"
    with pytest.raises(FormatRuleError, match="absent.npz: hardware-sample file must exist"):
        hw.load(missing)
    with pytest.raises(FormatRuleError, match="absent.npz: probe file must exist"):
        hw.load_probes(missing)


def test_a_file_that_is_not_npz_is_named(tmp_path):
    bad = tmp_path / "bad.npz"
    bad.write_bytes(b"not a zip archive")
    with pytest.raises(FormatRuleError, match="bad.npz: must be a readable .npz file"):
        hw.load(bad)
    with pytest.raises(FormatRuleError, match="bad.npz: must be a readable .npz file"):
        hw.load_probes(bad)


def test_missing_arrays_are_named(tmp_path):
    with np.load(hw.subset_path()) as raw:
        kept = {k: raw[k] for k in raw.files if not k.startswith("V100_")}
    np.savez(tmp_path / "partial.npz", **kept)
    with pytest.raises(FormatRuleError, match=r"must hold the arrays \['V100_a_f16bits'"):
        hw.load(tmp_path / "partial.npz")


def test_rows_of_the_wrong_dtype_are_refused(tmp_path):
    with np.load(hw.subset_path()) as raw:
        arrays = {k: raw[k] for k in raw.files}
    arrays["H100_c_f32bits"] = arrays["H100_c_f32bits"].astype(np.int64)
    np.savez(tmp_path / "wide.npz", **arrays)
    with pytest.raises(FormatRuleError, match="H100 rows must be uint16 .* and uint32"):
        hw.load(tmp_path / "wide.npz")
