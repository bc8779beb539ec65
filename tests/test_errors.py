import pytest

from refsim import errors


@pytest.mark.parametrize("cls", [errors.ShapeError, errors.DtypeError, errors.FormatRuleError, errors.NonFiniteError])
def test_every_input_error_is_a_refsim_error_and_a_value_error(cls):
    assert issubclass(cls, errors.RefsimError)
    assert issubclass(cls, ValueError)


def test_toolchain_error_is_not_an_input_error():
    assert not issubclass(errors.ToolchainError, ValueError)
    assert issubclass(errors.ToolchainError, RuntimeError)


def test_non_finite_is_a_format_rule():
    assert issubclass(errors.NonFiniteError, errors.FormatRuleError)
