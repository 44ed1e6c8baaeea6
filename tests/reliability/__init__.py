"""The reliability tier: a package, so that its control plane stops after its last test (conftest.py)."""
