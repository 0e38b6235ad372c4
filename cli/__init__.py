"""Command-line interface (`luma`)."""
