"""PEX chains assembled from pex-trial records already in the ledger (imported or measured)."""
