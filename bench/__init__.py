"""Benchmarks of jobqueue (and, later, its peers) on the same machine in one run."""
