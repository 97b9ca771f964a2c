#include "storage/safetensors.h"
#include "storage/atomic_file.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "safetensors data is little-endian; this reader assumes a little-endian host"
#endif

static const struct {
    const char *name;
    size_t size;
} DTYPES[ST_DTYPE_COUNT] = {
    [ST_BOOL] = {"BOOL", 1},    [ST_U8] = {"U8", 1},   [ST_I8] = {"I8", 1},
    [ST_F8_E4M3] = {"F8_E4M3", 1}, [ST_F8_E5M2] = {"F8_E5M2", 1},
    [ST_I16] = {"I16", 2},      [ST_U16] = {"U16", 2}, [ST_F16] = {"F16", 2},
    [ST_BF16] = {"BF16", 2},    [ST_I32] = {"I32", 4}, [ST_U32] = {"U32", 4},
    [ST_F32] = {"F32", 4},      [ST_I64] = {"I64", 8}, [ST_U64] = {"U64", 8},
    [ST_F64] = {"F64", 8},
};

const char *safetensors_dtype_name(SafetensorsDtype d) {
    return ((unsigned)d < ST_DTYPE_COUNT) ? DTYPES[d].name : "?";
}

size_t safetensors_dtype_size(SafetensorsDtype d) {
    return ((unsigned)d < ST_DTYPE_COUNT) ? DTYPES[d].size : 0;
}

int safetensors_dtype_parse(const char *name, SafetensorsDtype *out) {
    for (int d = 0; d < ST_DTYPE_COUNT; d++) {
        if (strcmp(name, DTYPES[d].name) == 0) {
            *out = (SafetensorsDtype)d;
            return 0;
        }
    }
    return -1;
}

struct SafetensorsFile {
    char *path;
    void *map;                      // the whole file, mapped read-only (NULL if empty)
    size_t map_size;
    unsigned char *owned;           // an aligned copy of the data region, when needed
    const unsigned char *data;      // the data region
    size_t data_size;
    cJSON *root;                    // owns every name and metadata string
    int n;
    SafetensorsTensor *tensors;     // header order
    int *by_name;                   // indices into tensors, sorted by name
    int n_meta;
    const char **meta_key, **meta_value;
};

// ---------------------------------------------------------------------------------------
// Reader

// Largest integer a JSON number may hold and still be exact in a double.
#define MAX_EXACT_INT 9007199254740992.0   // 2^53

// Reads a non-negative integer from a JSON number. Returns 0 ok, -1 not a number / not
// integral, -2 negative.
static int json_uint(const cJSON *v, uint64_t *out) {
    if (!cJSON_IsNumber(v)) return -1;
    double d = v->valuedouble;
    if (!isfinite(d) || d != floor(d)) return -1;
    if (d < 0) return -2;
    if (d > MAX_EXACT_INT) return -1;
    *out = (uint64_t)d;
    return 0;
}

// Sort keys (qsort has no context argument in C17, so the keys carry what they compare).
typedef struct {
    const char *name;
    size_t offset, nbytes;
    int idx;
} SortKey;

static int cmp_by_name(const void *a, const void *b) {
    return strcmp(((const SortKey *)a)->name, ((const SortKey *)b)->name);
}

static int cmp_by_offset(const void *a, const void *b) {
    const SortKey *x = a, *y = b;
    if (x->offset != y->offset) return x->offset < y->offset ? -1 : 1;
    if (x->nbytes != y->nbytes) return x->nbytes < y->nbytes ? -1 : 1;
    return 0;
}

static void shape_str(const SafetensorsTensor *t, char *buf, size_t cap) {
    size_t k = (size_t)snprintf(buf, cap, "[");
    for (int d = 0; d < t->ndim && k < cap; d++)
        k += (size_t)snprintf(buf + k, cap - k, "%s%lld", d ? ", " : "", (long long)t->shape[d]);
    if (k < cap) snprintf(buf + k, cap - k, "]");
}

// Fills t from one header entry; returns -1 with err set.
static int parse_entry(const char *path, const cJSON *entry, size_t data_size,
                       SafetensorsTensor *t, uint64_t *end_out, Error *err) {
    const char *name = entry->string;
    if (!cJSON_IsObject(entry)) {
        error_set(err, "%s: header entry '%s' is not an object", path, name);
        return -1;
    }
    const cJSON *dtype = cJSON_GetObjectItemCaseSensitive(entry, "dtype");
    const cJSON *shape = cJSON_GetObjectItemCaseSensitive(entry, "shape");
    const cJSON *offs = cJSON_GetObjectItemCaseSensitive(entry, "data_offsets");
    if (!dtype || !shape || !offs) {
        error_set(err, "%s: tensor '%s' lacks \"%s\"", path, name,
                  !dtype ? "dtype" : !shape ? "shape" : "data_offsets");
        return -1;
    }
    if (!cJSON_IsString(dtype)) {
        error_set(err, "%s: tensor '%s': \"dtype\" is not a string", path, name);
        return -1;
    }
    if (safetensors_dtype_parse(dtype->valuestring, &t->dtype) != 0) {
        error_set(err, "%s: tensor '%s': unknown dtype \"%s\"", path, name, dtype->valuestring);
        return -1;
    }
    t->dtype_size = safetensors_dtype_size(t->dtype);
    if (!cJSON_IsArray(shape)) {
        error_set(err, "%s: tensor '%s': \"shape\" is not an array", path, name);
        return -1;
    }
    int ndim = cJSON_GetArraySize(shape);
    if (ndim > SAFETENSORS_MAX_DIMS) {
        error_set(err, "%s: tensor '%s': %d dimensions (at most %d supported)", path, name, ndim,
                  SAFETENSORS_MAX_DIMS);
        return -1;
    }
    t->ndim = ndim;
    size_t numel = 1;
    bool overflow = false;
    int d = 0;
    for (const cJSON *v = shape->child; v; v = v->next, d++) {
        uint64_t dim;
        int rc = json_uint(v, &dim);
        if (rc == -2) {
            error_set(err, "%s: tensor '%s': negative dimension %g in \"shape\"", path, name,
                      v->valuedouble);
            return -1;
        }
        if (rc != 0) {
            error_set(err, "%s: tensor '%s': \"shape\" entry %d is not a non-negative integer",
                      path, name, d);
            return -1;
        }
        t->shape[d] = (int64_t)dim;
        if (__builtin_mul_overflow(numel, (size_t)dim, &numel)) overflow = true;
    }
    t->numel = numel;
    if (!cJSON_IsArray(offs) || cJSON_GetArraySize(offs) != 2) {
        error_set(err, "%s: tensor '%s': \"data_offsets\" is not an array of two integers", path,
                  name);
        return -1;
    }
    uint64_t begin, end;
    if (json_uint(offs->child, &begin) != 0 || json_uint(offs->child->next, &end) != 0) {
        error_set(err, "%s: tensor '%s': \"data_offsets\" holds a value that is not a "
                       "non-negative integer", path, name);
        return -1;
    }
    if (end < begin) {
        error_set(err, "%s: tensor '%s': data_offsets [%llu, %llu] end before begin", path, name,
                  (unsigned long long)begin, (unsigned long long)end);
        return -1;
    }
    char sh[160];
    shape_str(t, sh, sizeof sh);
    if (overflow || __builtin_mul_overflow(numel, t->dtype_size, &t->nbytes)) {
        error_set(err, "%s: tensor '%s': shape %s is too large", path, name, sh);
        return -1;
    }
    if (t->nbytes != end - begin) {
        error_set(err, "%s: tensor '%s': shape %s x %zu bytes (%s) = %zu bytes, but data_offsets "
                       "[%llu, %llu] span %llu", path, name, sh, t->dtype_size,
                  safetensors_dtype_name(t->dtype), t->nbytes, (unsigned long long)begin,
                  (unsigned long long)end, (unsigned long long)(end - begin));
        return -1;
    }
    if (end > data_size) {
        error_set(err, "%s: tensor '%s': data_offsets [%llu, %llu] lie beyond the data region "
                       "(%zu bytes)", path, name, (unsigned long long)begin,
                  (unsigned long long)end, data_size);
        return -1;
    }
    t->name = name;
    t->offset = (size_t)begin;
    *end_out = end;
    return 0;
}

// The header's JSON object into f->root: nothing but whitespace may follow it.
static int parse_json(SafetensorsFile *f, const char *hdr, size_t hlen, Error *err) {
    const char *parse_end = NULL;
    f->root = cJSON_ParseWithLengthOpts(hdr, hlen, &parse_end, 0);
    if (!f->root) {
        size_t at = (parse_end && parse_end >= hdr) ? (size_t)(parse_end - hdr) : 0;
        error_set(err, "%s: header is not valid JSON (error near byte %zu of %zu)", f->path, at, hlen);
        return -1;
    }
    for (const char *c = parse_end; c && c < hdr + hlen; c++) {
        if (*c != ' ' && *c != '\t' && *c != '\n' && *c != '\r') {
            error_set(err, "%s: header has trailing bytes after its JSON (at byte %zu of %zu)", f->path,
                      (size_t)(c - hdr), hlen);
            return -1;
        }
    }
    if (!cJSON_IsObject(f->root)) {
        error_set(err, "%s: header is not a JSON object", f->path);
        return -1;
    }
    return 0;
}

// Every entry but "__metadata__" into f->tensors; *meta: that entry (NULL when absent).
static int parse_entries(SafetensorsFile *f, const cJSON **meta, Error *err) {
    f->tensors = xcalloc((size_t)cJSON_GetArraySize(f->root) + 1, sizeof *f->tensors);
    *meta = NULL;
    for (const cJSON *e = f->root->child; e; e = e->next) {
        if (strcmp(e->string, "__metadata__") != 0) {
            uint64_t end;
            if (parse_entry(f->path, e, f->data_size, &f->tensors[f->n], &end, err) != 0) return -1;
            f->n++;
            continue;
        }
        if (*meta) {
            error_set(err, "%s: header has \"__metadata__\" twice", f->path);
            return -1;
        }
        if (!cJSON_IsObject(e)) {
            error_set(err, "%s: \"__metadata__\" is not an object", f->path);
            return -1;
        }
        *meta = e;
    }
    return 0;
}

// The "__metadata__" pairs: string values, each key once.
static int parse_metadata(SafetensorsFile *f, const cJSON *meta, Error *err) {
    const int nm = cJSON_GetArraySize(meta);
    f->meta_key = xcalloc((size_t)nm + 1, sizeof *f->meta_key);
    f->meta_value = xcalloc((size_t)nm + 1, sizeof *f->meta_value);
    for (const cJSON *m = meta->child; m; m = m->next) {
        if (!cJSON_IsString(m)) {
            error_set(err, "%s: \"__metadata__\" value for '%s' is not a string", f->path, m->string);
            return -1;
        }
        if (safetensors_metadata(f, m->string)) {
            error_set(err, "%s: \"__metadata__\" has key '%s' twice", f->path, m->string);
            return -1;
        }
        f->meta_key[f->n_meta] = m->string;
        f->meta_value[f->n_meta] = m->valuestring;
        f->n_meta++;
    }
    return 0;
}

// f->by_name from keys (sorted here by name); a name twice is refused (cJSON keeps both entries
// of a repeated key).
static int index_by_name(SafetensorsFile *f, SortKey *keys, Error *err) {
    qsort(keys, (size_t)f->n, sizeof *keys, cmp_by_name);
    for (int i = 1; i < f->n; i++) {
        if (strcmp(keys[i].name, keys[i - 1].name) == 0) {
            error_set(err, "%s: duplicate tensor name '%s' in header", f->path, keys[i].name);
            return -1;
        }
    }
    f->by_name = xmalloc(((size_t)f->n + 1) * sizeof *f->by_name);
    for (int i = 0; i < f->n; i++) f->by_name[i] = keys[i].idx;
    return 0;
}

// Sorted by offset (here), the tensors must tile [0, data_size) exactly.
static int check_tiling(const SafetensorsFile *f, SortKey *keys, Error *err) {
    qsort(keys, (size_t)f->n, sizeof *keys, cmp_by_offset);
    size_t pos = 0;
    const char *prev = NULL;
    for (int i = 0; i < f->n; i++) {
        const SortKey *t = &keys[i];
        if (t->offset < pos) {
            error_set(err, "%s: tensors '%s' and '%s' overlap (bytes %zu..%zu of the data region)", f->path, prev,
                      t->name, t->offset, pos);
            return -1;
        }
        if (t->offset > pos) {
            error_set(err, "%s: hole in the data region: bytes %zu..%zu (before tensor '%s') belong to no tensor",
                      f->path, pos, t->offset, t->name);
            return -1;
        }
        pos = t->offset + t->nbytes;
        prev = t->name;
    }
    if (pos != f->data_size) {
        error_set(err, "%s: hole in the data region: bytes %zu..%zu (after the last tensor) belong to no tensor",
                  f->path, pos, f->data_size);
        return -1;
    }
    return 0;
}

static int check_layout(SafetensorsFile *f, Error *err) {
    SortKey *keys = xmalloc(((size_t)f->n + 1) * sizeof *keys);
    for (int i = 0; i < f->n; i++)
        keys[i] = (SortKey){f->tensors[i].name, f->tensors[i].offset, f->tensors[i].nbytes, i};
    const int rc = index_by_name(f, keys, err) || check_tiling(f, keys, err) ? -1 : 0;
    free(keys);
    return rc;
}

static int parse_header(SafetensorsFile *f, const char *hdr, size_t hlen, Error *err) {
    const cJSON *meta = NULL;
    if (parse_json(f, hdr, hlen, err) || parse_entries(f, &meta, err)) return -1;
    if ((meta && parse_metadata(f, meta, err)) || check_layout(f, err)) return -1;
    for (int i = 0; i < f->n; i++) {
        SafetensorsTensor *t = &f->tensors[i];
        t->data = f->data + t->offset;
        t->aligned = ((uintptr_t)t->data % t->dtype_size) == 0;
    }
    return 0;
}

SafetensorsFile *safetensors_open(const char *path, Error *err) {
    SafetensorsFile *f = xcalloc(1, sizeof *f);
    f->path = strdup(path);
    check_alloc(f->path, strlen(path) + 1, __FILE__, __LINE__);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        error_set(err, "%s: cannot open: %s", path, strerror(errno));
        goto fail;
    }
    struct stat st;
    if (fstat(fd, &st) != 0) {
        error_set(err, "%s: cannot stat: %s", path, strerror(errno));
        goto fail_fd;
    }
    if (!S_ISREG(st.st_mode)) {
        error_set(err, "%s: not a regular file", path);
        goto fail_fd;
    }
    size_t size = (size_t)st.st_size;
    if (size < 8) {
        error_set(err, "%s: file is %zu bytes, shorter than the 8-byte header length", path, size);
        goto fail_fd;
    }
    f->map = mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (f->map == MAP_FAILED) {
        f->map = NULL;
        error_set(err, "%s: cannot map: %s", path, strerror(errno));
        goto fail_fd;
    }
    f->map_size = size;
    close(fd);
    fd = -1;

    const unsigned char *bytes = f->map;
    uint64_t hlen = 0;
    for (int i = 7; i >= 0; i--) hlen = (hlen << 8) | bytes[i];
    if (hlen > SAFETENSORS_MAX_HEADER) {
        error_set(err, "%s: header length %llu is absurdly large (limit %u)", path,
                  (unsigned long long)hlen, SAFETENSORS_MAX_HEADER);
        goto fail;
    }
    if (hlen > size - 8) {
        error_set(err, "%s: header length %llu runs past the end of the file (%zu bytes)", path,
                  (unsigned long long)hlen, size);
        goto fail;
    }
    f->data_size = size - 8 - (size_t)hlen;
    f->data = bytes + 8 + hlen;
    if (((uintptr_t)f->data % 8) != 0 && f->data_size > 0) {
        // A foreign file whose header length is not a multiple of 8: copy the data region so
        // that tensors at aligned offsets have aligned pointers.
        f->owned = xmalloc(f->data_size);
        memcpy(f->owned, f->data, f->data_size);
        f->data = f->owned;
    }
    if (parse_header(f, (const char *)bytes + 8, (size_t)hlen, err) != 0) goto fail;
    return f;

fail_fd:
    close(fd);
fail:
    safetensors_close(f);
    return NULL;
}

void safetensors_close(SafetensorsFile *f) {
    if (!f) return;
    if (f->map) munmap(f->map, f->map_size);
    free(f->owned);
    cJSON_Delete(f->root);
    free(f->tensors);
    free(f->by_name);
    free(f->meta_key);
    free(f->meta_value);
    free(f->path);
    free(f);
}

const char *safetensors_path(const SafetensorsFile *f) { return f->path; }
int safetensors_count(const SafetensorsFile *f) { return f->n; }

const SafetensorsTensor *safetensors_tensor(const SafetensorsFile *f, int i) {
    return (i >= 0 && i < f->n) ? &f->tensors[i] : NULL;
}

const SafetensorsTensor *safetensors_find(const SafetensorsFile *f, const char *name) {
    int lo = 0, hi = f->n - 1;
    while (lo <= hi) {
        int mid = lo + (hi - lo) / 2;
        const SafetensorsTensor *t = &f->tensors[f->by_name[mid]];
        int c = strcmp(name, t->name);
        if (c == 0) return t;
        if (c < 0) hi = mid - 1;
        else lo = mid + 1;
    }
    return NULL;
}

const char *safetensors_metadata(const SafetensorsFile *f, const char *key) {
    for (int i = 0; i < f->n_meta; i++)
        if (strcmp(f->meta_key[i], key) == 0) return f->meta_value[i];
    return NULL;
}

int safetensors_metadata_count(const SafetensorsFile *f) { return f->n_meta; }
const char *safetensors_metadata_key(const SafetensorsFile *f, int i) {
    return (i >= 0 && i < f->n_meta) ? f->meta_key[i] : NULL;
}
const char *safetensors_metadata_value(const SafetensorsFile *f, int i) {
    return (i >= 0 && i < f->n_meta) ? f->meta_value[i] : NULL;
}

const SafetensorsTensor *safetensors_expect(const SafetensorsFile *f, const char *name, int ndim,
                                            const int64_t *shape, Error *err) {
    const SafetensorsTensor *t = safetensors_find(f, name);
    if (!t) {
        error_set(err, "%s: no tensor named '%s'", f->path, name);
        return NULL;
    }
    bool same = t->ndim == ndim;
    for (int d = 0; same && d < ndim; d++) same = t->shape[d] == shape[d];
    if (!same) {
        SafetensorsTensor want = {.ndim = ndim};
        for (int d = 0; d < ndim && d < SAFETENSORS_MAX_DIMS; d++) want.shape[d] = shape[d];
        char got[160], exp[160];
        shape_str(t, got, sizeof got);
        shape_str(&want, exp, sizeof exp);
        error_set(err, "%s: tensor '%s' has shape %s, expected %s", f->path, name, got, exp);
        return NULL;
    }
    return t;
}

// ---------------------------------------------------------------------------------------
// Conversions

static float f32_from_bits(uint32_t u) {
    float x;
    memcpy(&x, &u, sizeof x);
    return x;
}

float safetensors_bf16_to_f32(uint16_t h) { return f32_from_bits((uint32_t)h << 16); }

float safetensors_f16_to_f32(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1Fu;
    uint32_t mant = h & 0x3FFu;
    if (exp == 0) {
        float mag = ldexpf((float)mant, -24);     // zero or subnormal, exact
        return sign ? -mag : mag;
    }
    if (exp == 31) return f32_from_bits(sign | 0x7F800000u | (mant << 13));
    return f32_from_bits(sign | ((exp + 112u) << 23) | (mant << 13));
}

uint16_t safetensors_f32_to_bf16(float x) {
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    if ((u & 0x7FFFFFFFu) > 0x7F800000u) return (uint16_t)((u >> 16) | 0x40u);   // quiet NaN
    u += 0x7FFFu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

int safetensors_to_f32(const SafetensorsTensor *t, float *out, size_t n, Error *err) {
    if (n != t->numel) {
        error_set(err, "tensor '%s': %zu elements, but %zu were asked for", t->name, t->numel, n);
        return -1;
    }
    const unsigned char *p = t->data;
    switch (t->dtype) {
    case ST_F32:
        if (n) memcpy(out, p, n * 4);
        return 0;
    case ST_BF16:
        for (size_t i = 0; i < n; i++) {
            uint16_t h;
            memcpy(&h, p + 2 * i, 2);
            out[i] = safetensors_bf16_to_f32(h);
        }
        return 0;
    case ST_F16:
        for (size_t i = 0; i < n; i++) {
            uint16_t h;
            memcpy(&h, p + 2 * i, 2);
            out[i] = safetensors_f16_to_f32(h);
        }
        return 0;
    case ST_F64:
        for (size_t i = 0; i < n; i++) {
            double d;
            memcpy(&d, p + 8 * i, 8);
            out[i] = (float)d;
        }
        return 0;
    default:
        error_set(err, "tensor '%s': dtype %s cannot be converted to float32 (need F32, F64, "
                       "BF16 or F16)", t->name, safetensors_dtype_name(t->dtype));
        return -1;
    }
}

// ---------------------------------------------------------------------------------------
// Writer

typedef struct {
    char *buf;
    size_t len, cap;
} Buf;

static void buf_put(Buf *b, const char *s, size_t n) {
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->len + n + 1) cap *= 2;
        b->buf = check_alloc(realloc(b->buf, cap), cap, __FILE__, __LINE__);
        b->cap = cap;
    }
    memcpy(b->buf + b->len, s, n);
    b->len += n;
    b->buf[b->len] = '\0';
}

static void buf_str(Buf *b, const char *s) { buf_put(b, s, strlen(s)); }

static void buf_fmt(Buf *b, const char *fmt, unsigned long long v) {
    char tmp[32];
    int k = snprintf(tmp, sizeof tmp, fmt, v);
    buf_put(b, tmp, (size_t)k);
}

// A JSON string literal: quotes, backslashes and control bytes escaped; UTF-8 passes through.
static void buf_json_string(Buf *b, const char *s) {
    buf_put(b, "\"", 1);
    for (const unsigned char *c = (const unsigned char *)s; *c; c++) {
        if (*c == '"') buf_put(b, "\\\"", 2);
        else if (*c == '\\') buf_put(b, "\\\\", 2);
        else if (*c < 0x20) {
            char tmp[8];
            snprintf(tmp, sizeof tmp, "\\u%04x", *c);
            buf_put(b, tmp, 6);
        } else buf_put(b, (const char *)c, 1);
    }
    buf_put(b, "\"", 1);
}

static int cmp_str_ptr(const void *a, const void *b) {
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

// Returns the first name that appears twice among names[0..n), or NULL.
static const char *first_duplicate(const char **names, int n) {
    if (n < 2) return NULL;
    const char **s = xmalloc((size_t)n * sizeof *s);
    memcpy(s, names, (size_t)n * sizeof *s);
    qsort(s, (size_t)n, sizeof *s, cmp_str_ptr);
    const char *dup = NULL;
    for (int i = 1; i < n && !dup; i++)
        if (strcmp(s[i], s[i - 1]) == 0) dup = s[i];
    free(s);
    return dup;
}

// One tensor's byte count, after checking its name, dtype and shape.
static int check_tensor(const char *path, int i, const SafetensorsWriteTensor *t, size_t *nbytes, Error *err) {
    if (!t->name || !t->name[0] || strcmp(t->name, "__metadata__") == 0) {
        error_set(err, "%s: tensor %d has an empty or reserved name", path, i);
        return -1;
    }
    const size_t es = safetensors_dtype_size(t->dtype);
    if (es == 0) {
        error_set(err, "%s: tensor '%s' has an invalid dtype", path, t->name);
        return -1;
    }
    if (t->ndim < 0 || t->ndim > SAFETENSORS_MAX_DIMS || (t->ndim > 0 && !t->shape)) {
        error_set(err, "%s: tensor '%s' has %d dimensions (0..%d allowed)", path, t->name, t->ndim,
                  SAFETENSORS_MAX_DIMS);
        return -1;
    }
    size_t numel = 1;
    for (int d = 0; d < t->ndim; d++) {
        if (t->shape[d] < 0 || __builtin_mul_overflow(numel, (size_t)t->shape[d], &numel)) {
            error_set(err, "%s: tensor '%s' has a negative or too large dimension %lld", path, t->name,
                      (long long)t->shape[d]);
            return -1;
        }
    }
    if (__builtin_mul_overflow(numel, es, nbytes)) {
        error_set(err, "%s: tensor '%s' is too large", path, t->name);
        return -1;
    }
    if (*nbytes > 0 && !t->data) {
        error_set(err, "%s: tensor '%s' has no data", path, t->name);
        return -1;
    }
    return 0;
}

// Every tensor's byte count into nbytes[n]; no name twice, no metadata key twice.
static int check_inputs(const char *path, int n, const SafetensorsWriteTensor *tensors, int n_meta,
                        const SafetensorsMeta *meta, size_t *nbytes, Error *err) {
    const char **names = xmalloc(((size_t)n + (size_t)n_meta + 1) * sizeof *names);
    int rc = -1;
    for (int i = 0; i < n; i++) {
        if (check_tensor(path, i, &tensors[i], &nbytes[i], err)) goto out;
        names[i] = tensors[i].name;
    }
    const char *dup = first_duplicate(names, n);
    if (dup) {
        error_set(err, "%s: tensor name '%s' given twice", path, dup);
        goto out;
    }
    for (int i = 0; i < n_meta; i++) {
        if (!meta[i].key || !meta[i].value) {
            error_set(err, "%s: metadata pair %d has a NULL key or value", path, i);
            goto out;
        }
        names[i] = meta[i].key;
    }
    if ((dup = first_duplicate(names, n_meta))) error_set(err, "%s: metadata key '%s' given twice", path, dup);
    else rc = 0;
out:
    free(names);
    return rc;
}

// "__metadata__":{key:value,...}
static void header_metadata(Buf *h, int n_meta, const SafetensorsMeta *meta) {
    buf_str(h, "\"__metadata__\":{");
    for (int i = 0; i < n_meta; i++) {
        if (i) buf_str(h, ",");
        buf_json_string(h, meta[i].key);
        buf_str(h, ":");
        buf_json_string(h, meta[i].value);
    }
    buf_str(h, "}");
}

// name:{"dtype":..,"shape":[..],"data_offsets":[pos,pos+nbytes]}
static void header_tensor(Buf *h, const SafetensorsWriteTensor *t, size_t pos, size_t nbytes) {
    buf_json_string(h, t->name);
    buf_str(h, ":{\"dtype\":");
    buf_json_string(h, safetensors_dtype_name(t->dtype));
    buf_str(h, ",\"shape\":[");
    for (int d = 0; d < t->ndim; d++) buf_fmt(h, d ? ",%llu" : "%llu", (unsigned long long)t->shape[d]);
    buf_fmt(h, "],\"data_offsets\":[%llu,", (unsigned long long)pos);
    buf_fmt(h, "%llu]}", (unsigned long long)(pos + nbytes));
}

// The 8-byte length and the JSON header, padded with spaces to a multiple of 8.
static void build_header(Buf *h, int n, const SafetensorsWriteTensor *tensors, const size_t *nbytes, int n_meta,
                         const SafetensorsMeta *meta) {
    buf_put(h, "\0\0\0\0\0\0\0\0", 8);
    buf_str(h, "{");
    if (n_meta > 0) header_metadata(h, n_meta, meta);
    size_t pos = 0;
    for (int i = 0; i < n; i++) {
        if (i > 0 || n_meta > 0) buf_str(h, ",");
        header_tensor(h, &tensors[i], pos, nbytes[i]);
        pos += nbytes[i];
    }
    buf_str(h, "}");
    while ((h->len - 8) % 8 != 0) buf_str(h, " ");
    for (int i = 0; i < 8; i++) h->buf[i] = (char)((uint64_t)(h->len - 8) >> (8 * i));
}

// The header, then every tensor's bytes in order, through the crash-safe writer.
static int write_file(const char *path, const Buf *h, int n, const SafetensorsWriteTensor *tensors,
                      const size_t *nbytes, char sha256[65], int64_t *bytes, Error *err) {
    AtomicFile *af = atomic_file_open(path, err);
    if (!af) return -1;
    int rc = atomic_file_append(af, h->buf, h->len, err);
    for (int i = 0; i < n && rc == 0; i++) rc = atomic_file_append(af, tensors[i].data, nbytes[i], err);
    if (rc == 0) return atomic_file_commit_hashed(af, sha256, bytes, err);
    atomic_file_abort(af);
    return -1;
}

int safetensors_write(const char *path, int n, const SafetensorsWriteTensor *tensors, int n_meta,
                      const SafetensorsMeta *meta, Error *err) {
    return safetensors_write_hashed(path, n, tensors, n_meta, meta, NULL, NULL, err);
}

int safetensors_write_hashed(const char *path, int n, const SafetensorsWriteTensor *tensors, int n_meta,
                             const SafetensorsMeta *meta, char sha256[65], int64_t *bytes, Error *err) {
    if (n < 0 || n_meta < 0 || (n > 0 && !tensors) || (n_meta > 0 && !meta)) {
        error_set(err, "%s: invalid tensor or metadata list", path);
        return -1;
    }
    size_t *nbytes = xmalloc(((size_t)n + 1) * sizeof *nbytes);
    Buf h = {0};
    int rc = check_inputs(path, n, tensors, n_meta, meta, nbytes, err);
    if (rc == 0) {
        build_header(&h, n, tensors, nbytes, n_meta, meta);
        rc = write_file(path, &h, n, tensors, nbytes, sha256, bytes, err);
    }
    free(h.buf);
    free(nbytes);
    return rc;
}
