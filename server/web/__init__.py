"""The web side of the server: the dashboard pages, their static files and offline API docs."""
