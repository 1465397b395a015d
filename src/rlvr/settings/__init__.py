"""Settings: the params schema's sections, recipes' methods, loading and checks."""
