"""Step 15 solution's kernel package: matvec.mojo registers the custom op `gpt2_matvec`."""
