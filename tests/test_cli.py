"""The ``refsim`` program itself: ``--version``, and ``python -m refsim`` the same program as the console script."""

import subprocess
import sys

import refsim
from refsim.cli import main


def test_version_flag(capsys):
    try:
        main(["--version"])
    except SystemExit as stop:
        assert stop.code == 0
    assert capsys.readouterr().out.strip() == f"refsim {refsim.__version__}"


def test_python_dash_m_behaves_like_the_console_script():
    out = subprocess.run([sys.executable, "-m", "refsim", "--version"], capture_output=True, text=True)
    assert out.returncode == 0
    assert out.stdout.strip() == f"refsim {refsim.__version__}"
