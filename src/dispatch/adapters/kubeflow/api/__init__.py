"""Talking to the Kubernetes API server: the client session, its errors, paged lists and
resumable watches, the cluster probe, submission, and the kinds of object read."""
