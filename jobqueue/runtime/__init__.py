"""One worker process: the claim loop, its slots, its heartbeat and its shutdown."""
