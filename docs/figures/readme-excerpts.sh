#!/usr/bin/env bash
# Rebuilds the project behind the README's Boundary and Design-In excerpts:
# a measured sprint on this machine, 150 synthetic chains (kb/records/synthetic.py: evidence class
# `synthetic`, never measured, each saying so in its provenance; this is no benchmark project,
# so none is signed as measured), the shipped machine catalog (vendor claims), the rules, the
# evidence by class, and both reports.  Usage: docs/figures/readme-excerpts.sh [DIR]
set -euo pipefail
here="$(cd "$(dirname "$0")/../.." && pwd)"
out="${1:-$(mktemp -d)/readme-excerpts}"
export LUMA_HOME="$out/project"
luma kb init
luma sprint run matvec-memory                     # measured here; makes this project's runner key
python - <<'PY'
import os
from pathlib import Path
from luma.kb.records.synthetic import write_jsonl
write_jsonl(Path(os.environ["LUMA_HOME"]) / "synthetic.jsonl", 150)
PY
luma kb ingest "$LUMA_HOME/synthetic.jsonl" "$here"/experiments/machines/*.json
luma rules run
luma kb query --name evidence-by-class
luma report boundary --out "$out/boundary"
luma report design-in --out "$out/design-in"
echo "reports: $out/boundary/report.md $out/design-in/report.md"
