"""Kubeflow Trainer v2: runtime rules, TrainJob building, evidence and causes."""
