"""refsim.testing.campaign: check_kernel's cases on many workers, with the serial run's verdict."""

from __future__ import annotations

import re
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

from refsim.errors import FormatRuleError
from refsim.testing import campaign, harness


def _gptq(x, qweight, qzeros, scales, g_idx):
    return harness.FORMATS["gptq"].emulate((x, qweight, qzeros, scales, g_idx), "sm_80", 108)


def _gptq_wrong_at_long_k(x, qweight, qzeros, scales, g_idx):
    """Right below K = 1024, one output one ulp off from there on."""
    out = _gptq(x, qweight, qzeros, scales, g_idx).copy()
    if x.shape[1] >= 1024:
        out.view(np.uint16)[0, 0] ^= 1
    return out


def _raises(*inputs):
    raise ValueError("no kernel here")


CASE = {"m": 1, "k": 256, "n": 64, "group_size": 128, "act_order": False, "kind": "normal", "seed": 3}


def test_evaluate_judges_one_case_and_keeps_a_call_error_as_its_outcome():
    ok = campaign.evaluate(_gptq, "gptq", "sm_80", 108, None, None, CASE)
    assert ok == campaign.Outcome(0, 64, 0, 0.0, None, None)
    bad = campaign.evaluate(_gptq_wrong_at_long_k, "gptq", "sm_80", 108, None, None, {**CASE, "k": 1024})
    assert bad.bad == 1 and bad.bit_differ == 1 and bad.error is None
    err = campaign.evaluate(_raises, "gptq", "sm_80", 108, None, None, CASE)
    assert err.error[0] == "KernelCallError" and "raised ValueError: no kernel here" in err.error[1]


def test_a_parallel_run_counts_what_the_serial_run_counts():
    serial = harness.check_kernel(_gptq, "gptq", seed=5, max_examples=8, progress=False)
    lines = []
    with ThreadPoolExecutor(2) as ex:
        par = harness.check_kernel(_gptq, "gptq", seed=5, max_examples=8, executor=ex, progress=lines.append)
    assert (par.pinned, par.drawn, par.outputs, par.bit_differ) == (serial.pinned, serial.drawn, serial.outputs,
                                                                   serial.bit_differ)
    assert any(ln.startswith("campaign: 8 cases on ThreadPoolExecutor") for ln in lines)   # the drawn ones


def test_a_parallel_run_fails_on_the_serial_runs_case_with_its_report():
    with pytest.raises(harness.KernelMismatch) as serial:
        harness.check_kernel(_gptq_wrong_at_long_k, "gptq", seed=0, max_examples=6, progress=False)
    with ThreadPoolExecutor(2) as ex, pytest.raises(harness.KernelMismatch) as par:
        harness.check_kernel(_gptq_wrong_at_long_k, "gptq", seed=0, max_examples=6, executor=ex, progress=False)
    assert par.value.case == serial.value.case and par.value.case["k"] >= 1024
    def strip(text):
        return re.sub(r"\d+\.\d+ s", "T s", str(text))
    assert strip(par.value) == strip(serial.value)


def test_a_call_error_on_a_worker_is_raised_here_with_its_case():
    with ThreadPoolExecutor(2) as ex, pytest.raises(harness.KernelCallError, match="raised ValueError") as err:
        harness.check_kernel(_raises, "gptq", seed=0, max_examples=2, executor=ex, progress=False)
    assert err.value.case is not None


def test_a_bad_executor_is_refused_before_any_case():
    with pytest.raises(FormatRuleError, match="executor: must be None, an executor spec"):
        harness.check_kernel(_raises, "gptq", executor=2, progress=False)
    with pytest.raises(FormatRuleError, match="executor: must be 'serial'"):
        harness.check_kernel(_gptq, "gptq", executor="gpu-farm", max_examples=1, progress=False)


KERNELS = '''
import numpy as np
from refsim.testing.cases import FORMATS

def gemv(x, qweight, qzeros, scales, g_idx):
    out = FORMATS["gptq"].emulate((x, qweight, qzeros, scales, g_idx), "sm_80", 108).copy()
    if x.shape[1] >= 4096:
        out.view(np.uint16)[0, 0] ^= 1
    return out
'''


@pytest.mark.slow
def test_a_65_case_campaign_on_a_2_worker_local_cluster_gives_the_serial_verdict(tmp_path):
    path = tmp_path / "k.py"
    path.write_text(KERNELS)

    def check(*extra):
        res = subprocess.run([sys.executable, "-m", "refsim", "check", f"{path}:gemv", "--fmt", "gptq", "--seed", "1",
                              "--max-examples", "60", "--no-shrink",
                              "--deadline", "900", *extra], capture_output=True, text=True,
                             timeout=900, cwd=tmp_path)
        return res.returncode, re.sub(r"\d+\.\d+ s", "T s", res.stdout), res.stderr

    rc_s, out_s, _ = check()
    rc_d, out_d, err_d = check("--executor", "dask-local:2")
    assert rc_s == rc_d == 1 and "gptq kernel differs" in out_s
    assert out_d == out_s
    assert "campaign: 60 cases on dask-local:2" in err_d          # the drawn cases; the 5 pinned run here
