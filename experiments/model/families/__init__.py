"""Published config.json values of common open models, one file per LUMA model preset."""
