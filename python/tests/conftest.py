"""Shared fixtures: the module under test and the CLI it is checked against.

ctest (python/CMakeLists.txt) sets FG_PYTHON_MODULE_DIR to the build tree's
module folder and FG_CLI to the fusegraph binary; run by hand after
`pip install .`, the installed module is tested and the CLI comparisons look
for build/fusegraph (else they skip).
"""
import os
import pathlib
import subprocess
import sys

import pytest

if os.environ.get("FG_PYTHON_MODULE_DIR"):
    sys.path.insert(0, os.environ["FG_PYTHON_MODULE_DIR"])

ROOT = pathlib.Path(os.environ.get("FG_SOURCE_DIR", pathlib.Path(__file__).parents[2]))


@pytest.fixture(scope="session")
def fg():
    import fusegraph
    return fusegraph


@pytest.fixture(scope="session")
def cli():
    """Runs the fusegraph CLI; returns (returncode, stdout, stderr)."""
    path = os.environ.get("FG_CLI") or str(ROOT / "build" / "fusegraph")
    if not os.path.exists(path):
        pytest.skip("no fusegraph CLI to compare with (set FG_CLI)")

    def run(*args):
        p = subprocess.run([path, *args], capture_output=True, text=True, timeout=300)
        return p.returncode, p.stdout, p.stderr
    return run


@pytest.fixture(scope="session")
def demo_plan(fg):
    """The demo decoder for the CPU reference (no CUDA code)."""
    return fg.compile("demo", ctx=256, prefill=[16], cuda=False)
