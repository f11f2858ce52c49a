"""Saying what is wrong: `localise` (which sub-part of a wrong output differs), `model` (where in a whole
model the stream goes wrong) and `compiled` (each step's piece compiled alone, to find the one that
changes when compiled)."""
