"""Tools: the smoke, the dry run, the memory check, the preflight and the docs' generated blocks."""
