"""kubetrain training program: ucluster."""
