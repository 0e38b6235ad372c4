"""OWL/RDFS ontology, SHACL shapes and JSON Schemas, shipped as package data."""
