"""Measurements: the finished model against transformers, and the checker's own latency.

- `__main__`   `pixi run bench`: prefill and decode, MAX vs transformers, one process, JSON out
- `kv_cache`   drives the fast path: solution 13 (GPT2WithCache), compiled
- `bandwidth`  the machine's read bandwidth and the decode limit it sets
- `checks`     `pixi run bench --checks`: every step's check timed cold and warm
"""
