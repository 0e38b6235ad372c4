"""Rule files (SPARQL) for the rule engine; the engine itself arrives with the rules issue."""
