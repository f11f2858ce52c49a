"""`pixi run gpt2 "prompt"` (python -m gpt2): your GPT-2 writes, token by token; `__main__` is the command."""
