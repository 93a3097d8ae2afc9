"""Bad: raises while being imported."""
raise RuntimeError("cannot find the tokenizer\nsecond line")
