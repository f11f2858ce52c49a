"""Try each step 15 injection on the kernel part only."""
import sys, shutil, tempfile, time
from pathlib import Path
import checker
from checker.mojo import run_probe
from checker.step15 import kernel_cases, _kernel_part
from checker.runner import StepRun
from checker.weights import find_checkpoint
sys.path.insert(0, ".")
from tests.injections import INJECTIONS
ck = find_checkpoint("synthetic")
src = Path("solutions/solution_15_kernel/matvec.mojo").read_text()
for mid in sys.argv[1:]:
    old, new = INJECTIONS["15"][mid]
    olds, news = (old, new) if isinstance(old, tuple) else ((old,), (new,))
    text = src
    for o, n in zip(olds, news):
        assert text.count(o) == 1, o
        text = text.replace(o, n)
    d = Path(tempfile.mkdtemp())
    (d / "step_15.py").write_text(Path("solutions/solution_15.py").read_text())
    shutil.copytree("solutions/solution_15_kernel", d / "solution_15_kernel")
    (d / "solution_15_kernel/matvec.mojo").write_text(text)
    run = StepRun("15", "x", d / "step_15.py", ck, "", ["kernel"], timeout=300)
    t = time.time()
    part = _kernel_part(run, d / "step_15.py", ck.learner_config())
    print(mid, part.status, part.mistake and part.mistake.id, part.summary, part.details[:3], f"{time.time()-t:.0f}s", flush=True)
