"""The ``refsim`` program itself: ``--version``, and ``python -m refsim`` the same program as the console script."""

import subprocess
from pathlib import Path
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


CT = str(__import__("pathlib").Path(__file__).parent / "io" / "data" / "ct_w4a16_sym")


def test_a_closed_stdout_ends_quietly_with_128_plus_sigpipe():
    # `refsim inspect DIR | head -0`: the reader is gone before the first line is written
    import os

    from refsim.cli import EXIT_BROKEN_PIPE

    read_end, write_end = os.pipe()
    os.close(read_end)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (str(Path(refsim.__file__).parents[1]),
                                                                   os.environ.get("PYTHONPATH")) if p)}
    try:
        out = subprocess.run([sys.executable, "-m", "refsim", "inspect", CT], stdout=write_end,
                             stderr=subprocess.PIPE, text=True, env=env, timeout=120)
    finally:
        os.close(write_end)
    assert EXIT_BROKEN_PIPE == 141
    assert (out.returncode, out.stderr) == (141, "")


def test_a_broken_pipe_inside_a_subcommand_is_not_reported_as_an_error(capsys, monkeypatch):
    class Closed:
        def write(self, text):
            raise BrokenPipeError(32, "Broken pipe")

        def flush(self):
            raise BrokenPipeError(32, "Broken pipe")

    monkeypatch.setattr(sys, "stdout", Closed())
    assert main(["inspect", CT]) == 141
    assert capsys.readouterr().err == ""
