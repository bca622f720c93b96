"""Tests mirror the package (tests/accounting/ for slurm_energy/accounting/, ...); the shared
helpers (jobrecord_factory, report_records, store_backends, published_runs, fakes/) live here and
are importable from every sub-directory."""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
