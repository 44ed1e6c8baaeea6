"""Pure builders: a parsed Job in, Kubernetes objects (plain dicts) out. No I/O in this package."""
