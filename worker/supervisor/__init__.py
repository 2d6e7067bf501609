"""The worker supervisor: register, claim, run the job in a child, heartbeat, report. Never touches CUDA."""
