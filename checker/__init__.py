"""The course's check machinery: weights, references, diagnosis and reports.

Each step's check lives in `checker/stepNN.py` and is run with
`python -m checker NN` (the `pixi run sNN` tasks). The pieces they share:

- `paths`      where the repo, the weights and the caches are
- `weights`    finds, downloads, verifies or generates a GPT-2 checkpoint
- `reference`  Hugging Face outputs, computed once and cached on disk
- `learner`    imports a learner's step file and runs its code safely
- `compare`    numbers against references, and the diagnosis of mistakes
- `report`     the per-part verdict lines and the exit code
"""
