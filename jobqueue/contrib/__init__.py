"""Optional apps built on jobqueue; each is its own Django app, installed by name."""
