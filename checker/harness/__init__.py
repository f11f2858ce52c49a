"""What every step's check is run with: `runner` (a step's parts and its report), `deps` (the
learner's earlier steps and their verdicts), `layout` (which step a file is, in any of the
layouts), `verdicts` (verdicts cached by content)."""
