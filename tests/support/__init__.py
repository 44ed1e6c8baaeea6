"""What the test tiers share: harnesses and fakes, imported as `tests.support.<module>` (pytest puts the repository
root on sys.path: pyproject.toml's `pythonpath`)."""
