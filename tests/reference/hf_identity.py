#!/usr/bin/env python3
"""By hand: a model fine-tuned with pptrain from a Hugging Face folder comes back as that model.

    python3 tests/reference/hf_identity.py build/pptrain

In a temporary folder it
  1. saves, with transformers, a small LlamaForCausalLM whose config has Llama-3-style ids
     (bos 1, eos [2, 7], pad 0) and a generation_config.json, beside a byte-level BPE tokenizer
     trained with the `tokenizers` package on tests/fixtures/text (tokenizer.json,
     tokenizer_config.json, ...). Its weights make greedy decoding emit token 7 at once: every
     layer's output projections are zero, so the last hidden state is the token's embedding,
     whose first component is large, and lm_head reads only that component into token 7;
  2. runs `pptrain train --init-from` on it for 2 steps (P=2) with a checkpoint, and
     `pptrain export` of that checkpoint;
  3. loads the export with AutoTokenizer and AutoModelForCausalLM.from_pretrained and requires:
     no warning from transformers, the source's bos/eos/pad in config.json and
     generation_config.json, the tokenizer files byte for byte, and `generate` stopping after
     one new token, 7: the second eos of the list. With eos 2 alone it runs to max_new_tokens,
     so the stop is the list's doing (an export with the byte tokenizer's eos 257 never stops).
Prints one line per check and exits 1 on a failure. Needs torch, transformers, tokenizers.
"""
import filecmp
import json
import logging
import os
import subprocess
import sys
import tempfile
import warnings

import torch
import transformers
from transformers import AutoModelForCausalLM, AutoTokenizer, LlamaConfig, LlamaForCausalLM

from pptrain_ref import save_byte_level_bpe

HERE = os.path.dirname(os.path.abspath(__file__))
TEXT = os.path.join(HERE, "..", "fixtures", "text")
SPECIALS = ["<pad>", "<s>", "</s>", "<unk>", "<r4>", "<r5>", "<r6>", "<|eot_id|>"]   # ids 0..7
VOCAB = 300
FAILED = []


def check(what, ok):
    print(("ok    " if ok else "FAIL  ") + what)
    if not ok:
        FAILED.append(what)


def make_tokenizer(out):
    save_byte_level_bpe(out, TEXT, VOCAB, SPECIALS, template_bos=False)


def make_model(out):
    cfg = LlamaConfig(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                      num_key_value_heads=2, vocab_size=VOCAB, max_position_embeddings=256,
                      bos_token_id=1, eos_token_id=[2, 7], pad_token_id=0, tie_word_embeddings=False)
    torch.manual_seed(0)
    model = LlamaForCausalLM(cfg).float()
    with torch.no_grad():
        for layer in model.model.layers:
            layer.self_attn.o_proj.weight.zero_()
            layer.mlp.down_proj.weight.zero_()
        model.model.embed_tokens.weight[:, 0] = 10.0
        model.lm_head.weight.zero_()
        model.lm_head.weight[7, 0] = 1.0
    model.generation_config.bos_token_id, model.generation_config.eos_token_id = 1, [2, 7]
    model.generation_config.pad_token_id = 0
    model.save_pretrained(out)


def load_quietly(folder):
    """The export through AutoTokenizer and AutoModelForCausalLM, with every warning caught."""
    records = []

    class Keep(logging.Handler):
        def emit(self, record):
            records.append(record.getMessage())

    handler = Keep(level=logging.WARNING)
    transformers.logging.set_verbosity_warning()
    logging.getLogger("transformers").addHandler(handler)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        tok = AutoTokenizer.from_pretrained(folder)
        model = AutoModelForCausalLM.from_pretrained(folder)
    logging.getLogger("transformers").removeHandler(handler)
    return tok, model, records + [str(w.message) for w in caught]


def main():
    pptrain = os.path.abspath(sys.argv[1])
    work = tempfile.mkdtemp(prefix="pptrain_identity_")
    src, ckpt, out = (os.path.join(work, d) for d in ("src", "ckpt", "out"))
    make_tokenizer(src)
    make_model(src)
    print("source folder:", " ".join(sorted(os.listdir(src))))
    subprocess.run([pptrain, "train", "--init-from", src, "--tokenizer", "auto", "--data", TEXT, "--steps", "2", "--stages", "2",
                    "--batch", "4", "--seq", "32", "--lr", "1e-4", "--db", "", "--ckpt-dir", ckpt],
                   check=True, stdout=subprocess.DEVNULL)
    step = [os.path.join(root, d) for root, dirs, _ in os.walk(ckpt) for d in dirs if d == "step-000002"][0]
    subprocess.run([pptrain, "export", step, out], check=True)
    print("export folder:", " ".join(sorted(os.listdir(out))))
    tok, model, warned = load_quietly(out)
    check("AutoTokenizer and AutoModelForCausalLM load the export with no warning" +
          ("" if not warned else ": " + " | ".join(warned)), not warned)
    config = json.load(open(os.path.join(out, "config.json")))
    check("config.json keeps bos 1, eos [2, 7], pad 0",
          (config.get("bos_token_id"), config.get("eos_token_id"), config.get("pad_token_id")) == (1, [2, 7], 0))
    gen = model.generation_config
    check("generation_config keeps eos [2, 7]", gen.eos_token_id == [2, 7] and gen.bos_token_id == 1)
    for name in sorted(os.listdir(src)):
        if name.startswith("tokenizer") or name in ("special_tokens_map.json", "generation_config.json"):
            check(f"{name} is the source's, byte for byte", filecmp.cmp(os.path.join(src, name),
                                                                     os.path.join(out, name), shallow=False))
    ids = tok("The harbor at dawn", return_tensors="pt").input_ids
    check("the tokenizer encodes as the source's", ids.tolist() == AutoTokenizer.from_pretrained(src)(
        "The harbor at dawn", return_tensors="pt").input_ids.tolist())
    with torch.no_grad():
        stopped = model.generate(ids, max_new_tokens=8, do_sample=False)
        run_on = model.generate(ids, max_new_tokens=8, do_sample=False, eos_token_id=2)
    new = stopped[0, ids.shape[1]:].tolist()
    check(f"generate stops on the list's eos 7 after one token (new tokens {new})", new == [7])
    check(f"with eos 2 alone it runs to max_new_tokens ({run_on.shape[1] - ids.shape[1]} new)",
          run_on.shape[1] - ids.shape[1] == 8)
    print(f"transformers {transformers.__version__}, torch {torch.__version__}; files in {work}")
    sys.exit(1 if FAILED else 0)


if __name__ == "__main__":
    main()
