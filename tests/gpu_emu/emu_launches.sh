#!/usr/bin/env bash
# tests/gpu_emu/emu_launches.sh: the kernel calls one layer costs per microbatch (forward, and
# both backward halves) on a GPU stage, counted by the emulator (PPTRAIN_EMU_COUNT_SYNCS=1:
# "K kernel calls", tests/gpu_emu/cuda_emu.c: memsets and copies not included; its memsets
# are counted apart, "Z memsets", and a layer must have none) as the difference
# between a 2-layer and a 1-layer model over one step of M microbatches, divided by M.
# The fused projections and residual norms (engine/model/model_cuda.c) set the counts:
#   bf16, grouped queries (kv heads < heads): 56, down from 66 before the fusions:
#     forward -4: q alone + k|v batched (3 GEMMs -> 2), gate|up batched (2 -> 1), each residual
#       add fused with the norm after it (2 a layer);
#     backward input -3 and weight -3: one dx and one dW GEMM for q|k|v (3 -> 1 each) and for
#       gate|up (2 -> 1 each); the packing replaces the bf16 conversions one for one;
#   bf16, no grouped queries: 55 (q|k|v one batch: one GEMM fewer);
#   then flash attention (kernels/cuda/flash_attention.cu) took 7 more off both bf16 counts, to
#     49 and 48: attention reads q, k, v (and its output gradient) in fp32, so the bf16 copies
#     the old attention kernels read (made forward and again for the backward) are gone, and its
#     forward and backward are fewer kernels; the fp32 counts did not move;
#   then bf16 operand activations took 8 more off, to 41 and 40: the norms, SwiGLU and
#     attention write ln1, ln2, h and the attention output as bf16 where they make them
#     (narrow_operands), so their 4 conversions forward and the 4 again in the weight half (for
#     dW) are gone;
#   then 9 more, to 32 and 31: SwiGLU's and RoPE's backward write the gate|up and q|k|v
#     gradients straight into packed bf16 GEMM operands in the slot, so of the 5 packing calls
#     in the input half only dv's is left, and the weight half packs nothing;
#   then 4 more, to 28 and 27: each norm's backward writes its residual gradient's bf16 copy as
#     it writes the fp32 value (cuda_residual_rmsnorm_backward), so the conversions of the
#     layer's output gradient and of dxmid, once in each half, are gone; the copies of dout into
#     dxmid and of dxmid into dx went with them (copies are not counted here);
#   then 1 more, to 27 and 26: attention's backward writes dv straight into the packed q|k|v
#     gradient (bf16), so the last packing call is gone (and the zeroing of dv, a memset);
#   then 1 and 2 more, to 26 and 24: attention's backward runs RoPE's backward on dq (and,
#     without grouped queries, on dk) in its kernels' registers and writes them into the packed
#     gradient (cuda_flash_attention_rope_backward_bf16), so RoPE's backward call for q is gone,
#     and for k too where no group sum comes between;
#   then 1 more with grouped queries, to 25: the group sum rotates dk back by RoPE as it sums
#     the query heads' shares and writes it into the packed gradient, so RoPE's backward call for
#     k is gone there too;
#   then the residual adds moved into the output and down projections' epilogues
#     (cuda_linear_forward_residual), and each fused residual + norm became a plain norm: one
#     call for one, no count moves;
#   then 2 more in both modes, to 23 and 22 (bf16) and 35 and 34 (fp32): each norm's weight
#     gradient comes with its input gradient's call (cuda_residual_rmsnorm_backward's dweight),
#     so the weight half's two norm calls are gone (on a GPU, 3 kernels a norm became 2);
#   fp32: 37 with grouped queries (37 before the fusions too) and 36 without, before the norms'
#     weight gradients moved: the forward saves as in bf16, but fp32 operands were never
#     converted, so in each backward half the packing of the gradient blocks (2 + 3 calls) adds
#     back what the merged GEMMs save (1 + 2) and more.
# A change of a layer's kernels changes these numbers on purpose: update them with the reason.
# usage: emu_launches.sh PPTRAIN_EMU SOURCE_DIR
source "$(dirname "$0")/../cli/lib_cli.sh" "$@"

data="$src/tests/fixtures/text"
M=4
model() {   # model LAYERS KV_HEADS: a config file named after them (the tiny preset's shapes)
  printf '{"hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": %d, "num_attention_heads": 4,
 "num_key_value_heads": %d, "vocab_size": 259, "max_position_embeddings": 256}' "$1" "$2" > "l$1kv$2.json"
  echo "l$1kv$2.json"
}
calls() {   # calls WHAT LAYERS KV_HEADS args...: the "kernel calls" or "memsets" of a 1-step run
  local what=$1 cfg
  cfg=$(model "$2" "$3")
  shift 3
  PPTRAIN_EMU_COUNT_SYNCS=1 timeout 120 "$bin" train --data "$data" --model "$cfg" --batch 8 --seq 64 \
    --microbatches $M --steps 1 --device cuda --db '' "$@" 2>&1 >/dev/null | awk -v w="$what" '$0 ~ w { print $4 }'
}
# per_layer WANT KV_HEADS args...: a layer's kernel calls per microbatch are WANT, and its
# memsets none: every activation gradient is written by the call that makes it
# (kernels/cuda/kernels_cuda.h), so nothing in a layer is zeroed (11 memsets a layer in fp32
# and 4 in bf16 before that).
per_layer() {
  local want=$1 kv=$2 one two z1 z2
  shift 2
  one=$(calls "kernel calls" 1 "$kv" "$@")
  two=$(calls "kernel calls" 2 "$kv" "$@")
  if [ -z "$one" ] || [ -z "$two" ] || [ $(((two - one) % M)) -ne 0 ] || [ $(((two - one) / M)) -ne "$want" ]; then
    echo "  kv $kv $*: ${one:-?} kernel calls with 1 layer, ${two:-?} with 2, over $M microbatches: not $want a layer"
    return 1
  fi
  z1=$(calls memsets 1 "$kv" "$@")
  z2=$(calls memsets 2 "$kv" "$@")
  if [ -z "$z1" ] || [ -z "$z2" ] || [ "$z1" -ne "$z2" ]; then
    echo "  kv $kv $*: ${z1:-?} memsets with 1 layer, ${z2:-?} with 2: a layer zeroes something"
    return 1
  fi
}

check "bf16, grouped queries: 23 kernel calls and no memset a layer and microbatch (66 unfused, 56 before flash attention, 49 before bf16 operands)" per_layer 23 2
check "bf16, no grouped queries: 22 kernel calls and no memset a layer and microbatch" per_layer 22 4
check "fp32, grouped queries: 35 kernel calls and no memset a layer and microbatch" per_layer 35 2 --precision fp32
check "fp32, no grouped queries: 34 kernel calls and no memset a layer and microbatch" per_layer 34 4 --precision fp32
cli_finish
