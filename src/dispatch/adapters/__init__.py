"""Scheduler adapters: the contract in ``base``, one package per scheduler, loaded by name."""
