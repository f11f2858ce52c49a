"""Measurements: the finished model against transformers, and the checker's own latency.

- `__main__`   `pixi run bench`: its command line, and which run it asks for
- `measure`    prefill and decode, MAX vs transformers, one process; `--context`'s decode by context length
- `decoders`   both sides loaded, and every greedy decoder the bench times
- `report`     what the bench prints: its tables and lines
- `machine`    the CPU, its vector extensions and the package versions each report names
- `kv_cache`   drives the fast path: solution 13 (GPT2WithCache), compiled
- `checks`     `pixi run bench --checks`: every step's check timed cold and warm
"""
