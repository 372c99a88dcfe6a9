"""The Sandbox watch: a deterministic observer core and identity by labels and annotations."""
