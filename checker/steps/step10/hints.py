"""Step 10's hints, a ladder per part (`pixi run s10 --hint`), and the solution code each part checks
(`--solution`)."""

from checker.reporting.hinting import EARLIER, api

HINTS: dict[str, list[str]] = {
    "earlier": EARLIER,
    "construction": ["GPT2Model holds wte, wpe, h (the blocks) and ln_f.",
                     f"ModuleList ({api('nn.ModuleList')}) holds modules and names them 0, 1, ...",
                     "self.h = ModuleList(GPT2Block(config) for each of the n_layer blocks)."],
    "forward": ["Token embeddings plus position embeddings, then every block in order, then ln_f.",
                f"A [T, C] tensor adds to [B, T, C] by broadcasting; T is input_ids.shape[-1] "
                f"({api('Tensor.shape')}).",
                "self.wte(input_ids) + self.wpe(T); each block's output feeds the next; ln_f once."],
}

SOURCES: dict[str, str] = {"construction": "GPT2Model.__init__", "forward": "GPT2Model.forward"}
