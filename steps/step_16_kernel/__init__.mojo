"""Step 16: your kernel package. matvec_q8.mojo registers the custom op `gpt2_matvec_q8`."""
