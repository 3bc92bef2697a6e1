"""Settings: one shared base, thin per-environment files (dev, test, production)."""
