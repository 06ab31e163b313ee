"""An in-memory scheduler with Slurm-like and Kubernetes-like shapes, for tests and the simulator."""
