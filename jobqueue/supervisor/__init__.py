"""The supervisor: worker processes per pool, started, reaped and restarted."""
