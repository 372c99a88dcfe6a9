"""The one in-process Kubernetes client (ADR-0063): access, REST calls, watch frames."""
