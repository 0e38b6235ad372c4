"""Named SPARQL queries shipped as .rq files (`luma kb query --name NAME`)."""
