"""Step 03's hints, a ladder per part (`pixi run s03 --hint`), and the solution code each part checks
(`--solution`)."""

from checker.reporting.hinting import api

HINTS: dict[str, list[str]] = {
    "construction": ["LayerNorm has a learned scale `weight` (gamma) and shift `bias` (beta), one per channel.",
                     f"Tensor.ones ({api('Tensor.ones')}) and Tensor.zeros ({api('Tensor.zeros')}) make them.",
                     "weight: ones of shape [dim]; bias: zeros of the same shape; eps kept as it is."],
    "forward": ["Normalise each token's vector on its own: statistics over the last axis only.",
                f"Tensor.mean ({api('Tensor.mean')}) keeps the reduced axis; F.sqrt ({api('F.sqrt')}); "
                f"or F.layer_norm ({api('F.layer_norm')}) does it all in one op.",
                "(x - mean) / sqrt(var + eps) * weight + bias, with var the mean of the squared deviations."],
    "forward,": ["Tiny inputs make the variance tiny: where eps goes matters now.",
                 f"F.sqrt ({api('F.sqrt')}) of the variance plus eps, not the square root plus eps.",
                 "Divide by F.sqrt(var + self.eps)."],
}

SOURCES: dict[str, str] = {"construction": "LayerNorm.__init__", "forward": "LayerNorm.forward",
       "forward,": "LayerNorm.forward"}
