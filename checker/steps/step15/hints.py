"""Step 15's hints, a ladder per part (`pixi run s15 --hint`), and the solution code each part checks
(`--solution`)."""

from checker.reporting.hinting import EARLIER, api

HINTS: dict[str, list[str]] = {
    "earlier": EARLIER,
    "kernel": ["Start simple: one task, one float at a time, y[n, m] = b[m] + the sum over k of "
               "x[n, k] * w[m, k], with w's row m at m * K. Pass the kernel part first, then make it fast: "
               "bands of w's rows for the tasks, a vector of floats per operation, a scalar loop for the tail.",
               "Check each index against what it reads: x's row n starts at n * K, w's row m at m * K, y[n, m] "
               "is at n * M + m and is written once, by one task; b[m] is added once, after the sum (a SIMD "
               "accumulator started at b[m] adds it once per lane); the K % width columns after the last whole "
               "vector are summed too. The Mojo manual's pointers (https://docs.modular.com/mojo/manual/"
               "pointers/), MAX's custom ops (https://docs.modular.com/max/develop/build-custom-ops).",
               "acc += wp.unsafe_load[width=W](m * K + k) * xp.unsafe_load[width=W](n * K + k) while "
               "k + W <= K; then s = acc.reduce_add(), the tail for j in range(k, K), and y = s + b[m], once."],
    "decode": ["The kernel passed alone: what is left is which tensors go into it. Each KernelLinear must hold "
               "its own Linear's weight and bias, and the head multiplies by wte's weight (tied).",
               f"Module.children ({api('nn.Module')}) gives (name, child) pairs; setattr(module, name, "
               f"KernelLinear(child)) replaces one; Tensor.reshape ({api('Tensor.reshape')}): [B, 1, C] to "
               "[-1, C] for matvec, and back.",
               "In forward: step 13's forward, with the last line's head as matvec(last, t.wte.weight)."],
    "timing": ["The timing part is a report: it passes whatever the speed.",
               "Decode reads every weight once per token: tokens/s x weight bytes = the bandwidth you reach "
               "(SIMD widths: https://docs.modular.com/mojo/std/builtin/simd/SIMD/).",
               "Faster: more rows of w per pass (each load of x serves them), wider vectors, as many tasks "
               "as the CPU has threads or a few more."],
}

SOURCES: dict[str, str] = {"kernel": "matvec", "decode": "GPT2WithKernel.forward", "timing": "KernelLinear.forward"}
