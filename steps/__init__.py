"""Your workspace: one file per step of the course."""
