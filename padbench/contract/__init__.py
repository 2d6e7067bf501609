"""The shared contract: job specs, result schemas and API bodies (pydantic only, no torch)."""
