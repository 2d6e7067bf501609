"""One router per resource: jobs, comparisons of jobs, workers, leases, health."""
