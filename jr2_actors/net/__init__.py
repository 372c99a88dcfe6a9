"""What both HTTP clients (Kubernetes, Harness) share: requests' errors and bodies, and the cut of a call in flight."""
