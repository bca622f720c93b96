"""Shared test helpers: record factories, sample-file rows, store back ends, an ordinary user, the
attack environment. Imported as ``from tests.helpers.jobrecord_factory import ...``."""
