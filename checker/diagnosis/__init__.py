"""Saying what is wrong: `localise` (which sub-part of a wrong output differs) and `compiled`
(each step's piece compiled alone, to find the one that changes when compiled)."""
