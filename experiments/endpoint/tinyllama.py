"""A small generative model made here, honestly, for the llama.cpp generation contract: nothing is
downloaded. A sentencepiece BPE tokenizer (512 pieces) and a 2-layer Llama (hidden 64, two heads
of 32 — llama.cpp's Q8_0 KV cache needs head sizes in blocks of 32) are trained on text LUMA
ships (its example sentences, rule files and ontology), on one thread with fixed seeds, and saved
as a Hugging Face folder that llama.cpp's own converter turns into GGUF (`endpoint/gguf.py`).

It is not a good language model (a few seconds of training); it is a real decoder whose KV cache
grows with every token, which is what the contract qualifies.
"""

from __future__ import annotations

import importlib.resources
import json
import os
import shutil
import sys
from pathlib import Path

from luma.kernels.sentences import CALIBRATION, SENTENCES

#: Changing any of these changes the model (and its artifact hash).
CONFIG = {"vocab_size": 512, "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2,
          "num_attention_heads": 2, "num_key_value_heads": 2, "max_position_embeddings": 2048,
          "bos_token_id": 1, "eos_token_id": 2, "tie_word_embeddings": False}
STEPS, BATCH, WINDOW, LR, SEED = 400, 16, 64, 3e-3, 0


def corpus() -> list[str]:
    """The training text: the shipped sentences, rule files and ontology, line by line."""
    lines = [*SENTENCES, *CALIBRATION]
    for package, suffix in (("luma.rules", ".rq"), ("luma.ontology", ".ttl")):
        for p in sorted(importlib.resources.files(package).iterdir(), key=lambda p: p.name):
            if p.name.endswith(suffix):
                lines += [ln.strip() for ln in p.read_text().splitlines() if len(ln.strip()) > 20]
    return lines


def build(out: Path) -> Path:
    """Train the tokenizer and the model into the folder `out` (written aside, then renamed)."""
    import sentencepiece as spm
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    out = Path(out)
    tmp = out.with_name(f".{out.name}.{os.getpid()}.tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    lines = corpus()
    text = tmp / "corpus.txt"
    text.write_text("\n".join(lines))
    spm.SentencePieceTrainer.train(input=str(text), model_prefix=str(tmp / "tokenizer"),
                                   vocab_size=CONFIG["vocab_size"], model_type="bpe", character_coverage=1.0,
                                   bos_id=1, eos_id=2, unk_id=0, pad_id=-1, num_threads=1, minloglevel=2)
    sp = spm.SentencePieceProcessor(model_file=str(tmp / "tokenizer.model"))
    data = torch.tensor([t for ln in lines for t in [1, *sp.encode(ln), 2]])
    threads = torch.get_num_threads()
    torch.manual_seed(SEED)
    torch.set_num_threads(1)  # one thread: the same floating-point sums, so the same model, everywhere
    try:
        model = LlamaForCausalLM(LlamaConfig(**CONFIG))
        opt = torch.optim.AdamW(model.parameters(), lr=LR)
        for _ in range(STEPS):
            ix = torch.randint(0, len(data) - WINDOW - 1, (BATCH,))
            x = torch.stack([data[i:i + WINDOW] for i in ix])
            loss = model(input_ids=x, labels=x).loss
            opt.zero_grad()
            loss.backward()
            opt.step()
    finally:
        torch.set_num_threads(threads)
    model.save_pretrained(tmp, safe_serialization=True)
    (tmp / "tokenizer_config.json").write_text(json.dumps(
        {"add_bos_token": True, "add_eos_token": False, "tokenizer_class": "LlamaTokenizer"}))
    (tmp / "training.json").write_text(json.dumps({"final_loss": float(loss.detach()), "steps": STEPS, "lines": len(lines)}))
    text.unlink()
    if out.exists():
        shutil.rmtree(out)
    os.replace(tmp, out)
    return out


def main(argv: list[str]) -> int:
    """`python -m luma.experiments.endpoint.tinyllama OUT`: build the model into the folder OUT
    (a contract's `prepare` for engines that load Hugging Face folders, e.g. vLLM)."""
    if len(argv) != 1:
        print("usage: python -m luma.experiments.endpoint.tinyllama OUT", file=sys.stderr)
        return 2
    build(Path(argv[0]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
