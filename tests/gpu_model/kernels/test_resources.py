"""The measured resource tables of the official kernels (refsim/data/timings/resources_*.csv)."""

import pytest

from refsim.errors import FormatRuleError
from refsim.gpu_model.kernels import resources


def test_anyprec_table_covers_every_instantiation_main_cu_dispatches():
    for cc in ("7.5", "8.0", "8.6", "8.7", "8.9", "9.0"):
        for maxm in range(1, 9):
            for bits in range(3, 9):
                regs, smem = resources.anyprec(cc, maxm, bits, False)
                assert 32 <= regs <= 255 and smem > 0
        for bits in (7, 8):
            assert resources.anyprec(cc, 1, bits, True)[0] >= resources.anyprec(cc, 1, bits, False)[0]


def test_known_values_as_ptxas_printed_them():
    # spot values typed from the ptxas logs (nvcc 13.0): the table must not drift
    assert resources.anyprec("8.9", 1, 4, False) == (40, 128)
    assert resources.anyprec("8.9", 8, 4, False)[0] == 255
    assert resources.marlin("8.0", 1, 8, 8, -1) == 128 and resources.marlin("9.0", 4, 16, 4, 8) == 254
    assert resources.atom("8.0") == 220 and resources.atom("8.9") == 221


@pytest.mark.parametrize("call", [lambda: resources.anyprec("6.1", 1, 4, False), lambda: resources.anyprec("8.9", 9, 4, False),
                                  lambda: resources.marlin("8.0", 5, 16, 4, 8), lambda: resources.atom("7.5"),
                                  lambda: resources.anyprec(8.9, 1, 4, False), lambda: resources.anyprec("8.9", 1, 4, 1)])
def test_a_configuration_outside_the_table_is_a_named_error(call):
    with pytest.raises(FormatRuleError):
        call()
