"""Checks for files of Modular's online book that none of this course's steps reads as its own: its
step 12 split in two (`encode_text`, `decode_tokens`; `generate_text`), checked as step 12, and its
main program (`run_model`), checked for what it runs and calls as step 11.

    step12.py          encode_text, decode_tokens and generate_text
    main_program.py    run_model
"""

from checker.registry import Adapter
from checker.steps.online_book import main_program, step12

ADAPTERS = [Adapter("12", ("encode_text", "decode_tokens", "generate_text"), step12.check),
            Adapter("11", ("run_model",), main_program.check)]
