"""Where the measured gitmail is installed: as its users install it (`pip install .`, not editable), in a virtual
environment made for the run and removed after it. A developer's editable install loads setuptools' editable finder
at every Python start, which imports pathlib, re, contextlib, urllib.parse and importlib.util: there `python -c pass`
costs about three times what it costs a user (33 ms against 11 ms on the same machine), and gitmail finds those
modules already loaded. Measuring there would flatter every ratio to `python -c pass` and hide what imports cost.

The run's environment sees the running interpreter's packages (the dependencies, the peer, the MCP client) through
a path file, which adds their directories to `sys.path` without running the path files found in them (the editable
finder's among them). `--in-place` measures the running interpreter as it is."""

from __future__ import annotations

import os
import shutil
import site
import subprocess
import sys
import sysconfig
import tempfile
from pathlib import Path

from .runner import BenchError, progress

VENV = "GITMAIL_BENCH_VENV"  # set in the re-started run: the environment it runs in, removed when it ends
ROOT = Path(__file__).resolve().parents[2]  # the source tree: pyproject.toml, gitmail/, scripts/
INSTALLED = os.environ.get(VENV)  # read at the start: the sandbox replaces the environment while it runs


def where() -> str:
    """How the measured gitmail was installed, for the report."""
    return "pip install . (not editable), in a venv of its own" if INSTALLED else "in place"


def restart_installed(argv: list[str]) -> None:
    """Re-start this run in a new environment holding gitmail installed from the tree; return only where it cannot
    be made (the caller says so and stops)."""
    venv = Path(tempfile.mkdtemp(prefix="gitmail-bench-venv-"))
    progress(f"installing gitmail from {ROOT} (pip install ., not editable) into {venv}")
    try:
        subprocess.run(
            [sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, capture_output=True, text=True
        )
        python = venv / "bin" / "python"
        purelib = subprocess.run(
            [python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            check=True,
            capture_output=True,
            text=True,
        ).stdout.strip()
        shared = [*site.getsitepackages(), sysconfig.get_paths()["purelib"]]
        Path(purelib, "_gitmail_bench_shared.pth").write_text("\n".join(dict.fromkeys(shared)) + "\n")
        subprocess.run(
            [python, "-m", "pip", "install", "-q", "--no-deps", "--ignore-installed", str(ROOT)],
            check=True,
            capture_output=True,
            text=True,
        )
    except (OSError, subprocess.CalledProcessError) as error:
        shutil.rmtree(venv, ignore_errors=True)
        said = (getattr(error, "stderr", None) or "").strip().splitlines()  # pip's own last words, when it ran
        raise BenchError(f"the run's environment cannot be made: {said[-1] if said else error}") from None
    os.execve(python, [str(python), str(ROOT / "scripts" / "bench"), *argv], {**os.environ, VENV: str(venv)})


def remove_installed() -> None:
    """At the end of a re-started run: remove the environment it ran in."""
    if INSTALLED and Path(INSTALLED).name.startswith("gitmail-bench-venv-"):
        shutil.rmtree(INSTALLED, ignore_errors=True)
