"""The sprint core: contracts, machine states, trials, the boundary search, a sprint and its records."""
