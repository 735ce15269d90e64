"""Small helpers every layer uses: user-facing errors and files written atomically."""
