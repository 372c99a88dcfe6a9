"""What both HTTP clients (Kubernetes, Harness) share: requests' errors and bodies, the cut of a call in flight,
and a cookie jar that keeps nothing."""
