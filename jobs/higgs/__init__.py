"""kubetrain training program: higgs."""
