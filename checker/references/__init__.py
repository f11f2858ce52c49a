"""What the checks compare with: `weights` (find, download, verify a checkpoint), `synthetic`
(the two stand-ins, generated), `files` (a checkpoint's files and sums), `reference` (Hugging
Face's outputs, cached), and the numpy GPT-2 that computes known mistakes (`gpt2_np`,
`attention_np`, `block_np`), `bandwidth` (the read bandwidth the decode timings
are set against); `data/` the stand-ins' tokenizer corpus."""
