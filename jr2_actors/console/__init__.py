"""The Console, served by `serve` on the API's port: the runs, each run's graph lit where it stands."""
