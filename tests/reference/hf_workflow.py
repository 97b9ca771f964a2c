#!/usr/bin/env python3
"""By hand: writes tests/fixtures/hf_workflow/, the fixture of tests/cli/cli_hf_workflow.sh.

    python3 tests/reference/hf_workflow.py [build/pptrain]

The fixture is what a user brings and what transformers says about it, so the CLI test can hold
pptrain's whole text-to-export path to an independent reference without Python:
  model/         a small random LlamaForCausalLM (GQA 4/2, 4 layers, untied) saved by transformers
                 beside a byte-level BPE tokenizer trained with `tokenizers` on tests/fixtures/text
                 (its template puts BOS first; eos is </s>), with a generation_config.json;
  check.bin      an llm.c shard (uint16, magic 20240520 v1) of exactly B*T+1 = 4*32+1 tokens: the
                 first tokens of the validation split as transformers' tokenizer encodes it. Packed
                 at --seq 32 it is 4 windows, so a batch of 4 is all of them and its mean loss does
                 not depend on the order pptrain draws them in;
  expected.json  for `pptrain tokenize --val-docs 3 tests/fixtures/text`: the token count and the
                 sha256 of each split's token bytes (uint16 little-endian), from transformers'
                 tokenizer (per document: encode with special tokens, then eos); and transformers'
                 mean cross-entropy of model/ on check.bin's 4 windows, in float64.

Documents are split as engine/data/data_text.c does: files in sorted order, paragraphs at blank
lines (whitespace-only), leading and trailing blank lines dropped, lines joined with "\\n".

With a pptrain binary as argument it also runs the workflow (tokenize, train --init-from at P=2,
export) and requires that transformers' loss of the export on check.bin equals what
`pptrain check --init-from EXPORT` reports, to 1e-5: the by-hand half of the CLI test's
"the export's loss is pptrain's". Needs torch, transformers, tokenizers, safetensors.
"""
import hashlib
import json
import os
import struct
import subprocess
import sys
import tempfile

import numpy as np
import torch
from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM

from pptrain_ref import save_byte_level_bpe

HERE = os.path.dirname(os.path.abspath(__file__))
TEXT = os.path.join(HERE, "..", "fixtures", "text")
OUT = os.path.join(HERE, "..", "fixtures", "hf_workflow")
SPECIALS = ["<pad>", "<s>", "</s>", "<unk>"]   # ids 0..3
VOCAB, B, T, VAL_DOCS = 300, 4, 32, 3


def documents():
    docs = []
    for name in sorted(os.listdir(TEXT)):
        lines = open(os.path.join(TEXT, name), "rb").read().decode("utf-8").split("\n")
        lines = [line[:-1] if line.endswith("\r") else line for line in lines]
        assert "%" not in lines, "fortune files are split differently"
        para = []
        for line in lines + [""]:
            if line.strip() == "":
                if any(not c.isspace() for c in "".join(para)):
                    docs.append("\n".join(para))
                para = []
            else:
                para.append(line)
    return docs


def make_tokenizer(out):
    save_byte_level_bpe(out, TEXT, VOCAB, SPECIALS, template_bos=True)


def make_model(out):
    cfg = LlamaConfig(hidden_size=32, intermediate_size=64, num_hidden_layers=4, num_attention_heads=4,
                      num_key_value_heads=2, vocab_size=VOCAB, max_position_embeddings=256,
                      bos_token_id=1, eos_token_id=2, pad_token_id=0, tie_word_embeddings=False)
    torch.manual_seed(0)
    model = LlamaForCausalLM(cfg).float()
    model.generation_config.bos_token_id, model.generation_config.eos_token_id = 1, 2
    model.generation_config.pad_token_id = 0
    model.save_pretrained(out)


def shard(tokens):
    header = struct.pack("<3i", 20240520, 1, len(tokens)) + bytes(1024 - 12)
    return header + np.asarray(tokens, dtype="<u2").tobytes()


def pack_loss(folder, tokens):
    """transformers' mean cross-entropy over the B windows of T+1 tokens (stride T), float64."""
    model = LlamaForCausalLM.from_pretrained(folder, torch_dtype=torch.float64).eval()
    rows = torch.tensor([tokens[w * T:w * T + T + 1] for w in range(B)])
    with torch.no_grad():
        logits = model(rows[:, :-1]).logits
    return torch.nn.functional.cross_entropy(logits.reshape(-1, VOCAB), rows[:, 1:].reshape(-1)).item()


def main():
    model_dir = os.path.join(OUT, "model")
    os.makedirs(model_dir, exist_ok=True)
    make_tokenizer(model_dir)
    make_model(model_dir)
    tok = AutoTokenizer.from_pretrained(model_dir)
    docs = documents()
    ids = [tok(d)["input_ids"] + [tok.eos_token_id] for d in docs]
    val = [t for doc in ids[:VAL_DOCS] for t in doc]
    train = [t for doc in ids[VAL_DOCS:] for t in doc]
    assert len(val) >= B * T + 1, "the validation split is shorter than one batch"
    check_tokens = val[:B * T + 1]
    open(os.path.join(OUT, "check.bin"), "wb").write(shard(check_tokens))
    body = lambda tokens: np.asarray(tokens, dtype="<u2").tobytes()
    expected = {
        "documents": len(docs),
        "val_docs": VAL_DOCS,
        "train_tokens": len(train), "train_sha256": hashlib.sha256(body(train)).hexdigest(),
        "val_tokens": len(val), "val_sha256": hashlib.sha256(body(val)).hexdigest(),
        "batch": B, "seq": T,
        "loss_source": pack_loss(model_dir, check_tokens),
    }
    with open(os.path.join(OUT, "expected.json"), "w") as f:
        json.dump(expected, f, indent=1)
        f.write("\n")
    print(json.dumps(expected, indent=1))
    if len(sys.argv) < 2:
        return
    pptrain = os.path.abspath(sys.argv[1])
    work = tempfile.mkdtemp(prefix="pptrain_workflow_")
    run = lambda *a: subprocess.run([pptrain, *a], check=True, cwd=work, capture_output=True, text=True).stdout
    run("tokenize", "--tokenizer", model_dir, "--out", "shards", "--val-docs", str(VAL_DOCS), TEXT)
    run("train", "--init-from", model_dir, "--data", "shards", "--batching", "pack", "--stages", "2",
        "--steps", "3", "--batch", str(B), "--seq", str(T), "--lr", "3e-3", "--db", "", "--ckpt-dir", "ck")
    step = [os.path.join(root, d) for root, dirs, _ in os.walk(os.path.join(work, "ck")) for d in dirs
            if d == "step-000003"][0]
    run("export", step, "out")
    got = json.loads(run("check", "--init-from", "out", "--data", os.path.join(OUT, "check.bin"), "--batching",
                         "pack", "--batch", str(B), "--seq", str(T), "--db", "", "--json"))["loss_single_device"]
    want = pack_loss(os.path.join(work, "out"), check_tokens)
    ok = abs(got - want) <= 1e-5 * abs(want)
    print(f"{'ok' if ok else 'FAIL'}  export's loss on check.bin: pptrain {got:.9f}, transformers {want:.9f}")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
