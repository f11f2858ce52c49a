"""Step 17 solution's kernel package: flash.mojo registers the custom op `gpt2_flash_attention`."""
