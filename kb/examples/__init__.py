"""Example records shipped for `luma demo` (illustrative, labelled as such in their provenance)."""
