"""The HTTP API: dependencies, error handling, and one router per resource."""
