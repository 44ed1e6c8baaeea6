"""`python -m tests.bench`: see run.py."""

from .run import main

raise SystemExit(main())
