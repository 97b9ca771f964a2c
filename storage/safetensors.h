// storage/safetensors: a validating reader and a durable writer for the safetensors format
// (https://github.com/huggingface/safetensors), the layout of Hugging Face checkpoints.
//
// File layout: an 8-byte little-endian u64 N, then N bytes of JSON (padded with spaces),
// then the data region. The JSON object maps each tensor name to
//   {"dtype": "F32", "shape": [rows, cols], "data_offsets": [begin, end]}
// (offsets relative to the data region) and may hold "__metadata__": {string: string}.
//
// The reader maps the file read-only and refuses, with one Error line naming the file and
// the problem, anything the specification forbids: a short file, a header length beyond the
// file (or over 100 MiB), a header that is not a JSON object, an entry with missing or
// mistyped fields, an unknown dtype, a negative or fractional dimension, a byte count that
// does not match shape x dtype size, offsets outside the data region, overlapping tensors,
// holes (sorted by offset the tensors must tile the data region exactly), duplicate names.
//
// The writer lays tensors out in the order given, pads the header with spaces to a multiple
// of 8 bytes (so every tensor whose offset is a multiple of its element size is aligned),
// and writes through storage/atomic_file: temporary file, fsync, rename, fsync of the folder.
#ifndef PPTRAIN_SAFETENSORS_H
#define PPTRAIN_SAFETENSORS_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "engine/error.h"

#define SAFETENSORS_MAX_DIMS 8
#define SAFETENSORS_MAX_HEADER (100u * 1024u * 1024u)   // same limit as the Rust reference

typedef enum {
    ST_BOOL = 0,
    ST_U8,
    ST_I8,
    ST_F8_E4M3,
    ST_F8_E5M2,
    ST_I16,
    ST_U16,
    ST_F16,
    ST_BF16,
    ST_I32,
    ST_U32,
    ST_F32,
    ST_I64,
    ST_U64,
    ST_F64,
    ST_DTYPE_COUNT
} SafetensorsDtype;

// "F32", "BF16", ...; "?" for an out-of-range value.
const char *safetensors_dtype_name(SafetensorsDtype d);
// Bytes per element (1, 2, 4 or 8); 0 for an out-of-range value.
size_t safetensors_dtype_size(SafetensorsDtype d);
// Parses a dtype name as it appears in a header; returns -1 when unknown.
int safetensors_dtype_parse(const char *name, SafetensorsDtype *out);

typedef struct {
    const char *name;               // valid while the file is open
    SafetensorsDtype dtype;
    size_t dtype_size;
    int ndim;                       // 0 for a scalar
    int64_t shape[SAFETENSORS_MAX_DIMS];
    size_t numel;                   // product of shape (1 for a scalar)
    size_t nbytes;                  // numel * dtype_size
    size_t offset;                  // begin, relative to the data region
    const void *data;               // read-only; nbytes bytes
    bool aligned;                   // data is a multiple of dtype_size (always true for
                                    // files this writer or Python's safetensors wrote)
} SafetensorsTensor;

typedef struct SafetensorsFile SafetensorsFile;

// Opens and validates path. Returns NULL with err set ("<path>: <problem>") on any failure.
SafetensorsFile *safetensors_open(const char *path, Error *err);
void safetensors_close(SafetensorsFile *f);

const char *safetensors_path(const SafetensorsFile *f);
// Tensors in header order (for files this writer produced: the order they were given).
int safetensors_count(const SafetensorsFile *f);
const SafetensorsTensor *safetensors_tensor(const SafetensorsFile *f, int i);
// The tensor with this name, or NULL (binary search).
const SafetensorsTensor *safetensors_find(const SafetensorsFile *f, const char *name);
// Metadata ("__metadata__"): the value for key, or NULL; and the pairs by index.
const char *safetensors_metadata(const SafetensorsFile *f, const char *key);
int safetensors_metadata_count(const SafetensorsFile *f);
const char *safetensors_metadata_key(const SafetensorsFile *f, int i);
const char *safetensors_metadata_value(const SafetensorsFile *f, int i);

// Finds name and checks its dtype-independent shape: ndim dims equal to shape[]. Returns the
// tensor, or NULL with err naming the file, the tensor and what differs (missing, shape).
const SafetensorsTensor *safetensors_expect(const SafetensorsFile *f, const char *name, int ndim,
                                            const int64_t *shape, Error *err);

// Converts t to float32 into out[0..n): F32 copies, BF16 and F16 widen exactly, F64 rounds to
// nearest. n must equal t->numel. Works on unaligned data. Returns -1 with err set for any
// other dtype or a count mismatch.
int safetensors_to_f32(const SafetensorsTensor *t, float *out, size_t n, Error *err);
// Scalar conversions (exposed for tests and for writers of BF16 exports).
float safetensors_bf16_to_f32(uint16_t h);
float safetensors_f16_to_f32(uint16_t h);
uint16_t safetensors_f32_to_bf16(float x);      // round to nearest even; NaN stays NaN

typedef struct {
    const char *name;
    SafetensorsDtype dtype;
    int ndim;                       // 0..SAFETENSORS_MAX_DIMS
    const int64_t *shape;           // ndim non-negative dims (may be NULL when ndim == 0)
    const void *data;               // numel * dtype size bytes
} SafetensorsWriteTensor;

typedef struct {
    const char *key;
    const char *value;
} SafetensorsMeta;

// Writes n tensors (in this order) and n_meta metadata pairs to path, atomically: nothing is
// left at path (nor a temporary file) unless the whole file is durable. Refuses duplicate or empty
// names, "__metadata__" as a tensor name, duplicate metadata keys and bad shapes.
int safetensors_write(const char *path, int n, const SafetensorsWriteTensor *tensors, int n_meta,
                      const SafetensorsMeta *meta, Error *err);
// The same, and the file's sha256 and size, hashed as it streams out (atomic_file_commit_hashed).
int safetensors_write_hashed(const char *path, int n, const SafetensorsWriteTensor *tensors, int n_meta,
                             const SafetensorsMeta *meta, char sha256[65], int64_t *bytes, Error *err);
#endif
