"""Fakes for hardware absent on the test machine (RAPL powercap trees, NVML devices)."""
