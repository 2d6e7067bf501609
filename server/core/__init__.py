"""Settings and authentication: what the server is configured with and who may call it."""
