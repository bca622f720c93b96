"""Build outside the source tree: the metadata is in pyproject.toml; this only moves setuptools'
scratch directories (``build/``, ``*.egg-info``) into a fresh temporary directory, so ``pip install``
works from a read-only checkout (a shared clone, a store mount) as an ordinary user and never
reuses stale files of an earlier build (tests/test_install_read_only_tree.py)."""

import atexit
import shutil
import tempfile

from setuptools import setup
from setuptools.command.build import build
from setuptools.command.egg_info import egg_info

_SCRATCH = tempfile.mkdtemp(prefix="slurm-energy-build-")
atexit.register(shutil.rmtree, _SCRATCH, True)


class OutOfTreeBuild(build):
    def initialize_options(self):
        super().initialize_options()
        self.build_base = _SCRATCH + "/build"


class OutOfTreeEggInfo(egg_info):
    def initialize_options(self):
        super().initialize_options()
        self.egg_base = _SCRATCH


setup(cmdclass={"build": OutOfTreeBuild, "egg_info": OutOfTreeEggInfo})
