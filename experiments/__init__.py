"""PEX qualification sprints (boundary search, diagnosis, intervention, recovery)."""
