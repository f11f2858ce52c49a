"""Step 18's kernel package: paged_flash.mojo registers `gpt2_paged_flash_attention`, matmul_q8.mojo `gpt2_matmul_q8`."""
