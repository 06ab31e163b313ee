"""The deterministic simulator that tests the supervisor against the memory scheduler."""
