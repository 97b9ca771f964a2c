# tests/reference/tokenizers_ref.py: trains small tokenizers of each Hugging Face family on
# public-domain text and writes the fixtures that tests/unit/test_tokenizer.c holds pptrain to.
#
# By hand, never in CI:  python3 tests/reference/tokenizers_ref.py
# Needs the `tokenizers` package (checked with 0.23.3). Writes tests/fixtures/tokenizers/:
#   <family>/tokenizer.json (+ tokenizer_config.json), one per family below;
#   cases.json: [{family, name, text_hex, ids, decoded_hex, lossless}] where ids come from
#   Tokenizer.encode(text, add_special_tokens=True) and decoded from Tokenizer.decode(ids)
#   (specials skipped). Invalid UTF-8 cannot reach `tokenizers` (it takes str): its expected
#   ids are those of the text decoded with errors="replace", which is what pptrain does under
#   a tokenizer with byte fallback; under one without, pptrain refuses the text, and the case
#   carries "error": true instead of ids.
import json
import os
import sys

from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "..", "fixtures", "tokenizers")
FORTUNES = "/usr/share/games/fortunes"

# A paragraph in the public domain (the US Declaration of Independence), so the script runs
# where fortune files are missing.
PARAGRAPH = ("When in the Course of human events, it becomes necessary for one people to dissolve "
             "the political bands which have connected them with another, and to assume among the "
             "powers of the earth, the separate and equal station to which the Laws of Nature and "
             "of Nature's God entitle them, a decent respect to the opinions of mankind requires "
             "that they should declare the causes which impel them to the separation.\n")

LLAMA3_SPLIT = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*"
                r"|\s*[\r\n]+|\s+(?!\S)|\s+")

# Every case the issue lists; a tokenizer's own special tokens are added per family.
TEXTS = [
    ("ascii", "Hello, world! The quick brown fox jumps over the lazy dog."),
    ("accented", "Café crème brûlée, naïve façade, Ångström, Øresund, señor, żółć."),
    ("cjk", "日本語のテキスト、中文文本，한국어 텍스트."),
    ("emoji", "I love 🍕 and 👩‍👩‍👧‍👦 families 🇫🇷 👍🏽!"),
    ("rtl", "שלום עולם مرحبا بالعالم"),
    ("zalgo", "Z̤͔ͧ̑̓ä͖̭̈̇lͮ̒ͫǧ̗͚̚o̙̔ͮ̇͐̇"),
    ("whitespace", "a  b   c\t\td\n\ne \n  \t\n\n\n   f    "),
    ("leading_space", "  two leading spaces and trailing  "),
    ("digits", "1 12 123 1234 12345 3.14159 2024-05-20 1000000"),
    ("contractions", "I'm sure you'll see it's what they've done; we'd say I'M, YOU'LL, it'S."),
    ("mixed", "Line one.\r\nLine two:\ttabs\u00a0nbsp\u2003em-space\u3000ideographic."),
    ("empty", ""),
    ("one_space", " "),
    ("newlines_only", "\n\n\n"),
    ("fortune", PARAGRAPH),
]

# (family, special tokens, bos for TemplateProcessing or None, byte fallback)
FAMILIES = {
    "gpt2": dict(specials=["<|endoftext|>"], bos=None),
    "llama3": dict(specials=["<|begin_of_text|>", "<|end_of_text|>", "<|eot_id|>"],
                   bos="<|begin_of_text|>"),
    "llama2": dict(specials=["<unk>", "<s>", "</s>"], bos="<s>"),
    "mistral": dict(specials=["<unk>", "<s>", "</s>"], bos="<s>"),
    # Variants: SmolLM's single digits before GPT-2's ByteLevel; ByteLevel adding a prefix
    # space; Metaspace always prepending and splitting at each space.
    "smollm": dict(specials=["<|endoftext|>", "<|im_start|>", "<|im_end|>"], bos=None),
    "gpt2_prefix": dict(specials=["<|endoftext|>"], bos=None),
    "metaspace_split": dict(specials=["<unk>", "<s>", "</s>"], bos="<s>"),
    # Split's other behaviors (and invert), each before a regex-less ByteLevel.
    "split_removed": dict(specials=["<|endoftext|>"], bos=None, split=(" ", "removed", False)),
    "split_next": dict(specials=["<|endoftext|>"], bos=None, split=(r"\s+", "merged_with_next", False)),
    "split_prev_invert": dict(specials=["<|endoftext|>"], bos=None, split=(r"\p{L}+", "merged_with_previous", True)),
    "split_contiguous": dict(specials=["<|endoftext|>"], bos=None, split=(r"\p{P}", "contiguous", False)),
    # Llama 3's pre-tokenizer with added tokens that are not special (kept by decode).
    "llama3_added": dict(specials=["<|begin_of_text|>", "<|end_of_text|>", "<|eot_id|>"],
                         bos="<|begin_of_text|>", added=["<tool>", " hello world", "Café"]),
}


def corpus():
    text = []
    if os.path.isdir(FORTUNES):
        for name in sorted(os.listdir(FORTUNES)):
            p = os.path.join(FORTUNES, name)
            if "." in name or not os.path.isfile(p):
                continue
            with open(p, encoding="utf-8", errors="replace") as f:
                # One document per fortune: a tokenizer without a pre-tokenizer trains on
                # whole documents as single words, so short ones keep training fast.
                text += [d for d in f.read().split("\n%\n") if d.strip()]
    text.append(PARAGRAPH)
    # A few non-Latin lines so the merges are not ASCII only.
    text += [t for _, t in TEXTS] * 20
    return text


def byte_level(family, texts):
    tok = Tokenizer(models.BPE(ignore_merges=family.startswith("llama3")))
    if family in ("gpt2", "gpt2_prefix"):
        tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=family == "gpt2_prefix", use_regex=True)
    elif "split" in FAMILIES[family]:
        pattern, behavior, invert = FAMILIES[family]["split"]
        tok.pre_tokenizer = pre_tokenizers.Sequence([
            pre_tokenizers.Split(pattern if pattern == " " else Regex(pattern), behavior=behavior, invert=invert),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    elif family == "smollm":
        tok.pre_tokenizer = pre_tokenizers.Sequence([
            pre_tokenizers.Digits(individual_digits=True),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)])
    else:
        tok.pre_tokenizer = pre_tokenizers.Sequence([
            pre_tokenizers.Split(Regex(LLAMA3_SPLIT), behavior="isolated", invert=False),
            pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=True, use_regex=False)])
    tok.decoder = decoders.ByteLevel()
    specials = FAMILIES[family]["specials"]
    trainer = trainers.BpeTrainer(vocab_size=700, special_tokens=specials, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(texts, trainer)
    tok.add_tokens(FAMILIES[family].get("added", []))
    bos = FAMILIES[family]["bos"]
    if bos:
        tok.post_processor = processors.TemplateProcessing(
            single=f"{bos} $A", pair=f"{bos} $A {bos} $B", special_tokens=[(bos, tok.token_to_id(bos))])
    else:
        tok.post_processor = processors.ByteLevel(trim_offsets=False)
    return tok


def sentencepiece(family, texts):
    # Train on the normalized text, then rebuild the vocabulary Llama 2's way: the specials,
    # then <0x00>..<0xFF>, then the learned pieces; merges name pieces, so they carry over.
    tok = Tokenizer(models.BPE(unk_token="<unk>", byte_fallback=True, fuse_unk=True))
    if family == "llama2":
        tok.normalizer = normalizers.Sequence([normalizers.Prepend("▁"), normalizers.Replace(" ", "▁")])
    elif family == "mistral":
        tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="first", split=False)
    else:
        tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="always", split=True)
    specials = FAMILIES[family]["specials"]
    trainer = trainers.BpeTrainer(vocab_size=600, special_tokens=specials, show_progress=False)
    tok.train_from_iterator(texts, trainer)
    j = json.loads(tok.to_str())
    learned = sorted(j["model"]["vocab"].items(), key=lambda kv: kv[1])
    vocab = {s: i for i, s in enumerate(specials)}
    for b in range(256):
        vocab[f"<0x{b:02X}>"] = len(vocab)
    for piece, _ in learned:
        if piece not in vocab:
            vocab[piece] = len(vocab)
    j["model"]["vocab"] = vocab
    for a in j["added_tokens"]:
        a["id"] = vocab[a["content"]]
    tok = Tokenizer.from_str(json.dumps(j))
    if family == "llama2":
        tok.decoder = decoders.Sequence([decoders.Replace("▁", " "), decoders.ByteFallback(),
                                         decoders.Fuse(), decoders.Strip(" ", 1, 0)])
    else:
        scheme = "first" if family == "mistral" else "always"
        tok.decoder = decoders.Sequence([decoders.ByteFallback(),
                                         decoders.Metaspace(replacement="▁", prepend_scheme=scheme, split=False)])
    bos = FAMILIES[family]["bos"]
    tok.post_processor = processors.TemplateProcessing(
        single=f"{bos} $A", pair=f"{bos} $A {bos} $B", special_tokens=[(bos, tok.token_to_id(bos))])
    return tok


def tokenizer_config(family):
    specials = FAMILIES[family]["specials"]
    if family in ("gpt2", "gpt2_prefix", "smollm") or family.startswith("split_"):
        return {"bos_token": specials[0], "eos_token": specials[0], "pad_token": None,
                "unk_token": specials[0], "model_max_length": 1024}
    if family.startswith("llama3"):
        return {"bos_token": specials[0], "eos_token": specials[1], "pad_token": specials[1],
                "model_max_length": 131072}
    return {"bos_token": "<s>", "eos_token": "</s>", "pad_token": None, "unk_token": "<unk>",
            "add_bos_token": True, "add_eos_token": False, "model_max_length": 2048}


def cases(family, tok, byte_fallback):
    specials = FAMILIES[family]["specials"]
    texts = list(TEXTS) + [("special_inside", f"before{specials[-1]}after {specials[0]} end"),
                           ("added_inside", "say hello world<tool>to the Café hello worlds")]
    out = []
    for name, text in texts:
        ids = tok.encode(text).ids
        dec = tok.decode(ids)
        out.append(dict(family=family, name=name, text_hex=text.encode().hex(), ids=ids,
                        decoded_hex=dec.encode().hex(), lossless=(dec == text)))
    bad = b"ok \xff\xfe then \xe2\x82 cut \xc3( and \xf0\x9f\x98 end"
    case = dict(family=family, name="invalid_utf8", text_hex=bad.hex(), lossless=False)
    if byte_fallback:
        ids = tok.encode(bad.decode("utf-8", errors="replace")).ids
        case.update(ids=ids, decoded_hex=tok.decode(ids).encode().hex())
    else:
        case["error"] = True
    out.append(case)
    return out


def main():
    texts = corpus()
    all_cases = []
    for family in FAMILIES:
        sp = family in ("llama2", "mistral", "metaspace_split")
        tok = sentencepiece(family, texts) if sp else byte_level(family, texts)
        d = os.path.join(OUT, family)
        os.makedirs(d, exist_ok=True)
        tok.save(os.path.join(d, "tokenizer.json"))
        with open(os.path.join(d, "tokenizer_config.json"), "w") as f:
            json.dump(tokenizer_config(family), f, indent=1)
        all_cases += cases(family, Tokenizer.from_file(os.path.join(d, "tokenizer.json")), sp)
        print(family, tok.get_vocab_size(), "tokens", file=sys.stderr)
    with open(os.path.join(OUT, "cases.json"), "w") as f:
        json.dump(all_cases, f, indent=0)


if __name__ == "__main__":
    main()
