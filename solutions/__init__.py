"""Reference implementations of the course's steps."""
