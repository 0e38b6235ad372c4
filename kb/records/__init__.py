"""Record formats that runners and partners submit, and their loading and validation."""
