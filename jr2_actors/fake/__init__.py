"""The fake cluster: a loopback Kubernetes API server, operator and Harness, as pykka actors."""
