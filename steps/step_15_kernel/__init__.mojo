"""Step 15's kernel package: write your kernel in matvec.mojo."""
