"""Report templates and renderers (Resource Boundary, Design-In, Partner Evaluation)."""
