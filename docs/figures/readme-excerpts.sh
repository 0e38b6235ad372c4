#!/usr/bin/env bash
# Rebuilds the project behind the README's Boundary and Design-In excerpts:
# a measured sprint on this machine, 150 synthetic chains signed by a key named "synthetic"
# (they say so in every record and the Design-In report counts them), the shipped machine
# catalog (vendor claims), the rules, and both reports.  Usage: docs/figures/readme-excerpts.sh [DIR]
set -euo pipefail
here="$(cd "$(dirname "$0")/../.." && pwd)"
out="${1:-$(mktemp -d)/readme-excerpts}"
export LUMA_HOME="$out/project"
luma kb init
luma sprint run matvec-memory                     # measured here; makes this project's runner key
luma runner keygen --name synthetic
python - <<'PY'
import os
from pathlib import Path
from luma.kb import runners
from luma.kb.synthetic import write_jsonl
home = Path(os.environ["LUMA_HOME"])
write_jsonl(home / "synthetic.jsonl", 150, signer=runners.signer(home, "synthetic"))
PY
luma kb ingest "$LUMA_HOME/synthetic.jsonl" "$here"/experiments/machines/*.json
luma rules run
luma report boundary --out "$out/boundary"
luma report design-in --out "$out/design-in"
echo "reports: $out/boundary/report.md $out/design-in/report.md"
