"""kubetrain's benchmarks: `python -m tests.bench --size small|full` (see run.py)."""
