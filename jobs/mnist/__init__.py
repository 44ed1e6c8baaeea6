"""kubetrain training program: mnist."""
