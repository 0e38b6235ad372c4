"""One calibration trial, in its own process: `python -m luma.experiments.model.probe SPEC OUT`.

It is the sprint worker's trial (same imports, warm-up, service loading and load test) run with no
memory limit, plus one figure the worker does not keep: the **peak data segment above the
runtime** — what a `host_memory` level must grant for the trial to pass. The kernel's VmPeak is
the peak of the whole address space; everything that is not data (code, libraries, stacks,
file mappings) is the same at the end as at the peak, so peak data = VmPeak − (VmSize − VmData)
at the end, minus the runtime's footprint measured after imports.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from luma.experiments.sprint import worker


def _status() -> dict[str, int]:
    out = {}
    with open("/proc/self/status") as fh:
        for line in fh:
            key, _, value = line.partition(":")
            if key.startswith("Vm"):
                out[key] = int(value.split()[0]) * 1024
    return out


def main(argv: list[str]) -> int:
    spec_path, out_path = argv
    spec = json.loads(Path(spec_path).read_text())
    tel = worker.run(spec)
    st = _status()
    foot = tel.get("runtime_footprint_bytes")
    if foot is not None:
        tel["peak_data_bytes"] = st["VmPeak"] - (st["VmSize"] - st["VmData"]) - foot
    Path(out_path).write_text(json.dumps(tel))
    return 0


def run(spec: dict, timeout_s: float) -> dict:
    """The telemetry of one probe trial (a failure telemetry if the process did not finish)."""
    env = dict(os.environ)
    if spec["state"].get("runtime"):
        env["ATEN_CPU_CAPABILITY"] = spec["state"]["runtime"]
    env.setdefault("MALLOC_ARENA_MAX", "2")  # as the sprint's trials run
    with tempfile.TemporaryDirectory(prefix="luma-probe-") as tmp:
        spec_path, out_path = Path(tmp) / "spec.json", Path(tmp) / "out.json"
        spec_path.write_text(json.dumps(spec))
        try:
            proc = subprocess.run([sys.executable, "-m", "luma.experiments.model.probe", str(spec_path), str(out_path)],
                                  env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, timeout=timeout_s,
                                  check=False)
        except subprocess.TimeoutExpired:
            return {"failure_cause": "timeout"}
        if out_path.exists():
            return json.loads(out_path.read_text())
        return {"failure_cause": "crash", "error": proc.stderr.decode(errors="replace")[-500:]}


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
