"""Example records shipped for `luma demo`: illustrative figures written for the documentation,
labelled vendor-claim (never measured) and saying so in their provenance. Measured chains come from
the demo's own sprint on the user's machine."""
