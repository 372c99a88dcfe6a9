"""The project's benchmarks: each script measures its baseline in the same run (`python -m bench` runs them all)."""
