"""The conformance suite every adapter must pass."""
