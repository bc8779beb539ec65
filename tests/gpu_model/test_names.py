"""One name per kernel and GPU, and one table of the other names people type (refsim.gpu_model.names)."""

import pytest

from refsim.errors import FormatRuleError
from refsim.gpu_model.kernels import KERNELS, kernel_module, predict
from refsim.gpu_model.names import GPU_ALIASES, KERNEL_ALIASES, resolve
from refsim.gpu_model.specs import GPUS, get_gpu


@pytest.mark.parametrize("alias, name", sorted(KERNEL_ALIASES.items()))
def test_old_kernel_names_are_aliases_of_the_new_ones(alias, name):
    assert kernel_module(alias) is kernel_module(name)
    assert kernel_module(alias.upper()).NAME == name
    assert predict("a10", alias, 1, 4096, 4096) == predict("a10", name, 1, 4096, 4096)


def test_every_alias_points_at_a_real_name():
    assert set(KERNEL_ALIASES.values()) <= set(KERNELS)
    for alias, name in GPU_ALIASES.items():
        if name in GPUS:
            assert get_gpu(alias) is GPUS[name]


@pytest.mark.parametrize("kind, bad, names", [("kernel", "marlin24", KERNELS), ("gpu", "h1000", GPUS)])
def test_unknown_names_list_the_names_and_the_aliases(kind, bad, names):
    with pytest.raises(FormatRuleError) as info:
        resolve(kind, bad, names)
    msg = str(info.value)
    assert msg.startswith(f"{kind}: must be one of [") and msg.endswith(f"got {bad!r}")
    some_alias = next(a for a, b in (KERNEL_ALIASES if kind == "kernel" else GPU_ALIASES).items() if b in names)
    assert f"{some_alias} -> " in msg and sorted(names)[0] in msg


def test_predict_errors_list_aliases():
    with pytest.raises(FormatRuleError, match="marlin-24 -> sparse-marlin"):
        predict("a10", "marlin-25", 1, 4096, 4096)
    with pytest.raises(FormatRuleError, match="4090 -> rtx4090"):
        predict("rtx5090", "marlin", 1, 4096, 4096)


@pytest.mark.parametrize("bad", [None, 3, b"a10", ["a10"]])
def test_non_string_names_are_refused_by_name(bad):
    with pytest.raises(FormatRuleError, match="^gpu: must be one of"):
        get_gpu(bad)
