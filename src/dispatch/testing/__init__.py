"""Test doubles worth shipping: the Kubernetes API emulator for offline Kubeflow tests."""
