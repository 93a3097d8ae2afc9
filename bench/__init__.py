"""MemFlow's benchmarks: ``python -m bench NAME`` writes NAME's table into BENCHMARKS.md."""
