"""Shared pieces of the PyTorch / Hugging Face reference for pptrain.

Everything here restates, independently, what pptrain's C code does:
  * the model presets (engine/model/model.h: "tiny", "small") as transformers.LlamaConfig,
  * parameter initialization from (seed, HF tensor name) (engine/model/init.h), in numpy,
  * the byte tokenizer and the "pad" batching (engine/data/tokenizer.h, engine/data/data.h),
  * the learning-rate schedule (linear warmup from 0.1*L, cosine decay to the minimum).

Run by hand only (never by CI); see tests/reference/README.md.
"""
import math

import numpy as np

# --------------------------------------------------------------------------------------
# Presets

BOS, EOS, PAD, VOCAB = 256, 257, 258, 259

PRESETS = {
    "tiny": dict(hidden_size=64, intermediate_size=128, num_hidden_layers=8,
                 num_attention_heads=4, num_key_value_heads=2, head_dim=16,
                 max_position_embeddings=256),
    "small": dict(hidden_size=512, intermediate_size=1536, num_hidden_layers=8,
                  num_attention_heads=8, num_key_value_heads=4, head_dim=64,
                  max_position_embeddings=1024),
}

COMMON = dict(vocab_size=VOCAB, rms_norm_eps=1e-5, tie_word_embeddings=False,
              attention_bias=False, mlp_bias=False, hidden_act="silu", initializer_range=0.02,
              bos_token_id=BOS, eos_token_id=EOS, pad_token_id=PAD, use_cache=False)
ROPE_THETA = 10000.0


def config_dict(preset):
    """The preset as plain LlamaConfig keyword arguments (rope_theta spelled out)."""
    d = dict(PRESETS[preset])
    d.update(COMMON)
    d["rope_theta"] = ROPE_THETA
    return d


def make_config(preset, attn_implementation=None):
    """A transformers.LlamaConfig for the preset. transformers >= 5 keeps the RoPE base in
    rope_parameters; older versions take rope_theta directly. Both are set and checked."""
    from transformers import LlamaConfig
    kw = dict(PRESETS[preset])
    kw.update(COMMON)
    try:
        cfg = LlamaConfig(**kw, rope_parameters={"rope_type": "default", "rope_theta": ROPE_THETA})
    except TypeError:
        cfg = LlamaConfig(**kw, rope_theta=ROPE_THETA)
    rp = getattr(cfg, "rope_parameters", None)
    theta = rp["rope_theta"] if rp else cfg.rope_theta
    assert theta == ROPE_THETA, theta
    assert cfg.head_dim == kw["head_dim"] and cfg.tie_word_embeddings is False
    if attn_implementation:
        cfg._attn_implementation = attn_implementation
    return cfg


def param_shapes(preset):
    """[(HF name, shape)] in Hugging Face order, shapes as HF stores them: (out, in)."""
    p = PRESETS[preset]
    C, I, L = p["hidden_size"], p["intermediate_size"], p["num_hidden_layers"]
    NH, NKV, HD = p["num_attention_heads"], p["num_key_value_heads"], p["head_dim"]
    out = [("model.embed_tokens.weight", (VOCAB, C))]
    for i in range(L):
        pre = f"model.layers.{i}."
        out += [(pre + "self_attn.q_proj.weight", (NH * HD, C)),
                (pre + "self_attn.k_proj.weight", (NKV * HD, C)),
                (pre + "self_attn.v_proj.weight", (NKV * HD, C)),
                (pre + "self_attn.o_proj.weight", (C, NH * HD)),
                (pre + "mlp.gate_proj.weight", (I, C)),
                (pre + "mlp.up_proj.weight", (I, C)),
                (pre + "mlp.down_proj.weight", (C, I)),
                (pre + "input_layernorm.weight", (C,)),
                (pre + "post_attention_layernorm.weight", (C,))]
    out += [("model.norm.weight", (C,)), ("lm_head.weight", (VOCAB, C))]
    return out


def is_norm(name):
    return name.endswith("layernorm.weight") or name == "model.norm.weight"


# --------------------------------------------------------------------------------------
# Initialization (engine/model/init.h), counter-based splitmix64 + Box-Muller

MASK64 = (1 << 64) - 1
GOLDEN_GAMMA = 0x9E3779B97F4A7C15


def fnv1a64(name):
    h = 0xCBF29CE484222325
    for b in name.encode("utf-8"):
        h ^= b
        h = (h * 0x100000001B3) & MASK64
    return h


def mix64_int(z):
    z &= MASK64
    z ^= z >> 30
    z = (z * 0xBF58476D1CE4E5B9) & MASK64
    z ^= z >> 27
    z = (z * 0x94D049BB133111EB) & MASK64
    z ^= z >> 31
    return z


def _mix64_np(z):
    # numpy uint64 array arithmetic wraps modulo 2^64 (no overflow checks for arrays)
    z = z ^ (z >> np.uint64(30))
    z = z * np.uint64(0xBF58476D1CE4E5B9)
    z = z ^ (z >> np.uint64(27))
    z = z * np.uint64(0x94D049BB133111EB)
    z = z ^ (z >> np.uint64(31))
    return z


def init_normal(n, seed, name, std=0.02):
    """n float32 values ~ N(0, std^2) for the tensor called name, bitwise as engine/model/init.c.
    std is a C float there, so it is rounded to float32 before use in double math."""
    key = mix64_int(fnv1a64(name) ^ mix64_int(seed))
    npairs = (n + 1) // 2
    c = np.arange(2 * npairs, dtype=np.uint64)
    with np.errstate(over="ignore"):
        r = _mix64_np(np.uint64(key) + (c + np.uint64(1)) * np.uint64(GOLDEN_GAMMA))
    u = ((r >> np.uint64(11)).astype(np.float64) + 0.5) * (2.0 ** -53)
    rad = np.sqrt(-2.0 * np.log(u[0::2]))
    ang = 2.0 * math.pi * u[1::2]
    normal = np.empty(2 * npairs, dtype=np.float64)
    normal[0::2] = rad * np.cos(ang)
    normal[1::2] = rad * np.sin(ang)
    std_d = float(np.float32(std))
    return (std_d * normal[:n]).astype(np.float32)


def init_weights(preset, seed, std=0.02):
    """{HF name: float32 numpy array}: matrices N(0, std^2) from (seed, name), norms 1."""
    out = {}
    for name, shape in param_shapes(preset):
        if is_norm(name):
            out[name] = np.ones(shape, dtype=np.float32)
        else:
            out[name] = init_normal(int(np.prod(shape)), seed, name, std).reshape(shape)
    return out


# --------------------------------------------------------------------------------------
# Byte tokenizer and pad batching (engine/data/data.h, "pad" mode)

def encode(text):
    return list(text.encode("utf-8"))


def pad_row(text, T):
    """BOS + bytes + EOS, clipped to T+1 tokens or right-padded with PAD; returns
    (inputs[T], targets[T]) with PAD targets set to -1."""
    row = [BOS] + encode(text) + [EOS]
    row = row[:T + 1] + [PAD] * max(0, T + 1 - len(row))
    inp = row[:T]
    tgt = [(-1 if t == PAD else t) for t in row[1:T + 1]]
    return inp, tgt


def make_batch(texts, T):
    rows = [pad_row(t, T) for t in texts]
    inputs = np.array([r[0] for r in rows], dtype=np.int32)
    targets = np.array([r[1] for r in rows], dtype=np.int32)
    return inputs, targets


# --------------------------------------------------------------------------------------
# Learning rate schedule

def lr_at(s, lr, warmup, steps, min_lr):
    """0-based step s: linear warmup from 0.1*lr to lr over `warmup` steps, then cosine decay
    from lr to min_lr at step `steps`."""
    if s < warmup:
        return lr * (0.1 + 0.9 * s / warmup)
    return min_lr + (lr - min_lr) * 0.5 * (1.0 + math.cos(math.pi * (s - warmup) / max(1, steps - warmup)))


# --------------------------------------------------------------------------------------
# Exact float64 execution of the HF Llama

def make_exact_float64(model):
    """Hugging Face's Llama deliberately runs three pieces in float32 whatever the model dtype:
    RMSNorm (upcast to float32, normalize, cast back), the RoPE tables (inv_freq and the angles
    are float32) and the eager attention softmax (dtype=torch.float32). In a float64 model that
    caps their precision at float32 (~1e-7 relative). This patches the model instance (and the
    eager attention function of modeling_llama) so every op runs in the parameters' dtype.
    The math is unchanged; only the rounding differs."""
    import torch
    import transformers.models.llama.modeling_llama as ml

    def rms_forward(self, x):
        var = x.pow(2).mean(-1, keepdim=True)
        return self.weight * (x * torch.rsqrt(var + self.variance_epsilon))

    for m in model.modules():
        if isinstance(m, ml.LlamaRMSNorm):
            m.forward = rms_forward.__get__(m)
        if isinstance(m, ml.LlamaRotaryEmbedding):
            cfg = model.config
            dim = cfg.head_dim
            inv = 1.0 / (ROPE_THETA ** (torch.arange(0, dim, 2, dtype=torch.float64) / dim))

            def rope_forward(self, x, position_ids, inv=inv):
                freqs = position_ids[..., None].to(torch.float64) * inv.to(x.device)
                emb = torch.cat((freqs, freqs), dim=-1)
                return emb.cos().to(x.dtype), emb.sin().to(x.dtype)

            m.forward = rope_forward.__get__(m)

    def eager_exact(module, query, key, value, attention_mask, scaling, dropout=0.0, **kwargs):
        k = ml.repeat_kv(key, module.num_key_value_groups)
        v = ml.repeat_kv(value, module.num_key_value_groups)
        w = torch.matmul(query, k.transpose(2, 3)) * scaling
        if attention_mask is not None:
            w = w + attention_mask
        w = torch.nn.functional.softmax(w, dim=-1, dtype=query.dtype)
        out = torch.matmul(w, v).transpose(1, 2).contiguous()
        return out, w

    ml.eager_attention_forward = eager_exact
    return model


def save_byte_level_bpe(out, text_dir, vocab, specials, template_bos=False):
    """A byte-level BPE tokenizer (GPT-2 / Llama 3 style) trained with the `tokenizers` package
    on the files of text_dir, saved by transformers into out with <s> </s> <pad> <unk> as its
    bos/eos/pad/unk; template_bos: its TemplateProcessing puts <s> first, as Llama 3's does.
    Used by hf_identity.py and hf_workflow.py."""
    import os
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
    from transformers import PreTrainedTokenizerFast
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    files = [os.path.join(text_dir, f) for f in sorted(os.listdir(text_dir))]
    tok.train(files, trainers.BpeTrainer(vocab_size=vocab, special_tokens=specials,
                                         initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    if template_bos:
        bos = specials.index("<s>")
        tok.post_processor = processors.TemplateProcessing(single="<s> $A", pair="<s> $A <s> $B",
                                                           special_tokens=[("<s>", bos)])
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<s>", eos_token="</s>",
                                   pad_token="<pad>", unk_token="<unk>")
    fast.save_pretrained(out)
