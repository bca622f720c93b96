"""The test suite as a package: its shared helpers are imported as ``tests.helpers`` and ``tests.fakes``
(the repository root is on ``sys.path`` through pytest's ``pythonpath`` setting in pyproject.toml)."""
