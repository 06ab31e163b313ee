"""The embedded local scheduler: a job's nodes as process groups on this machine."""
