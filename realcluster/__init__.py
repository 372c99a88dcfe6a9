"""A real Kubernetes control plane (etcd + kube-apiserver from Go modules) for the project's real-cluster tier.

`python -m realcluster build|up|fidelity` (realcluster/__main__.py); `RealCluster` (cluster.py) is what the
tier's pytest fixture starts; docs/fake-cluster.md "Against a real API server" says what it checks.
"""
