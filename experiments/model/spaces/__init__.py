"""Example state spaces (and the LLM serving contract they pair with) for `luma model explore`."""
