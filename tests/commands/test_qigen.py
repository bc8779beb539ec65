"""``refsim qigen``: prints the plan with its constraint arithmetic; --run checks the kernel."""

import shutil

import pytest

from refsim.cli import main


def test_plan_is_printed_with_the_l1_arithmetic(capsys):
    assert main(["qigen", "--k", "4096", "--n", "4096", "--bits", "4", "--group-size", "128"]) == 0
    out = capsys.readouterr().out
    assert "m_u + m_u*t_u + t_u <= eta" in out and "32*mb*n + b*mb*tb + 32*tb*n" in out
    assert "predicted:" in out


@pytest.mark.skipif(not shutil.which("cc") and not shutil.which("gcc"), reason="no C compiler")
def test_run_builds_and_checks_the_kernel(capsys):
    assert main(["qigen", "--k", "256", "--n", "64", "--bits", "3", "--run"]) == 0
    assert "bit-exact vs oracle: True" in capsys.readouterr().out
