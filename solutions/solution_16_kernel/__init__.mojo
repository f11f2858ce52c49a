"""Step 16 solution's kernel package: matvec_q8.mojo registers the custom op `gpt2_matvec_q8`, append.mojo
`gpt2_append` (the cache grown by one position, for decode)."""
