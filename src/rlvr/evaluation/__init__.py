"""Evaluation: checkpoints on the benchmarks, avg@k, pass@k and maj@k."""
