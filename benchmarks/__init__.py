"""breadth's benchmarks: run each from the repository root as ``python -m benchmarks.bench_x --help``."""
