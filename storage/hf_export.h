// storage/hf_export: a checkpoint (or any HF Llama folder) as a plain Hugging Face folder:
// one model.safetensors with every weight in HF order, config.json with the model's own token
// ids, and the generation and tokenizer files the source had (storage/model_identity.h). This
// is what `pptrain export` writes, for transformers, llama.cpp's converters, vLLM and the like.
#ifndef PPTRAIN_HF_EXPORT_H
#define PPTRAIN_HF_EXPORT_H
#include <stdbool.h>
#include <stdint.h>

#include "engine/error.h"

typedef struct {
    int64_t params;      // weights written
    int64_t bytes;       // size of model.safetensors
    int tensors;
    int identity_files;  // generation_config.json and tokenizer files copied
    char note[512];      // how the source was read, for the user (ckpt_note), or ""
} HfExportInfo;

// Whether out_dir may take an export: it does not exist yet, or it is an empty folder. Any
// entry in it (a hidden one too) is refused, naming it, so an export never writes over or
// beside a user's files. Returns 0, or -1 with a one-line err.
int hf_export_folder_check(const char *out_dir, Error *err);
// Reads src (a checkpoint folder, verified against its manifest, or a plain HF folder) and
// writes out_dir/model.safetensors (F32, or BF16 rounded to nearest even) and
// out_dir/config.json, each atomically, then copies src's identity files. out_dir is created;
// one that is not new or empty is refused before anything is read or written
// (hf_export_folder_check). Returns 0, or -1 with a one-line err.
int hf_export(const char *src, const char *out_dir, bool bf16, HfExportInfo *info, Error *err);
#endif
