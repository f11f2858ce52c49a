"""Numbers against references and the verdicts they make: `compare` (the tolerance rule, where
it differs, which known mistake it is) and `report` (the per-part lines and the exit code)."""
