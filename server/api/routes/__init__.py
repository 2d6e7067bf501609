"""One router per resource: jobs, workers, leases, health."""
