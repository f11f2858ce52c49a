"""Serve your GPT-2 with `max serve`: the glue between MAX's serving stack and your step 14.

    max serve --custom-architectures gpt2_arch --model <a GPT-2 checkpoint folder> ...

(`pixi run serve` runs it with the right flags.) MAX imports this package and reads
`ARCHITECTURES`; a checkpoint whose config.json names `GPT2LMHeadModel` is then served by
`GPT2PipelineModel`, which builds *your* model: step 11's GPT2LMHeadModel, loaded by your
`load_hf_weights`, wrapped in step 14's GPT2Paged, or in step 18's GPT2PagedQ8 (your kernels) when
the served file defines it. Which file: `GPT2_SERVED` (a path; default steps/step_14.py).

What is here changes with MAX's releases, not with the model: the architecture's config
(`arch.py`), the pipeline model and the graph's inputs (`model.py`), the step that takes a greedy
batch's next tokens without MAX's sampler (`pipeline.py`).
"""

from gpt2_arch.arch import gpt2_arch

ARCHITECTURES = [gpt2_arch]
