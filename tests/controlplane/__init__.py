"""The control-plane tier: a package, so that its control planes stop after its last test (conftest.py)."""
