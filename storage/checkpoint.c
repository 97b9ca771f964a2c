#include "storage/checkpoint.h"

#include <assert.h>
#include <cjson/cJSON.h>
#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "engine/json_read.h"
#include "engine/run_json.h"
#include "storage/atomic_file.h"
#include "storage/checkpoint_seal.h"
#include "storage/model_identity.h"
#include "storage/safetensors.h"

#define MAX_JSON_BYTES (64u << 20)

static void join(char *out, size_t cap, const char *dir, const char *name) { snprintf(out, cap, "%s/%s", dir, name); }

// ---- writing ----------------------------------------------------------------------------------

typedef struct {
    char *buf;
    size_t len, cap;
} Text;

static int64_t *shape_of(const ParamInfo *pi, int64_t shape[2], int *ndim) {
    shape[0] = pi->rows;
    shape[1] = pi->cols;
    *ndim = pi->cols ? 2 : 1;
    return shape;
}

// Appends printf-formatted text to *buf (grown as needed).
static void text_add(Text *t, const char *fmt, ...) {
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        const int n = vsnprintf(t->buf ? t->buf + t->len : NULL, t->buf ? t->cap - t->len : 0, fmt, ap);
        va_end(ap);
        assert(n >= 0);
        if (t->buf && t->len + (size_t)n < t->cap) {
            t->len += (size_t)n;
            return;
        }
        t->cap = (t->len + (size_t)n + 1) * 2;
        t->buf = check_alloc(realloc(t->buf, t->cap), t->cap, __FILE__, __LINE__);
        t->buf[t->len] = '\0';
    }
}

int ckpt_write_params(const char *path, const StageModel *sm, const CkptParamSet *sets, int n_sets, bool bf16,
                      const char *kind, CkptFile *written, Error *err) {
    const int n = sm->n_params * n_sets;
    SafetensorsWriteTensor *t = xcalloc((size_t)n, sizeof *t);
    char (*names)[128] = xcalloc((size_t)n, sizeof *names);
    int64_t (*shapes)[2] = xcalloc((size_t)sm->n_params, sizeof *shapes);
    uint16_t *half = bf16 ? xmalloc((size_t)n_sets * sm->numel * sizeof(uint16_t)) : NULL;
    for (int k = 0; half && k < n_sets; k++)
        for (size_t i = 0; i < sm->numel; i++) half[k * sm->numel + i] = safetensors_f32_to_bf16(sets[k].base[i]);
    for (int i = 0; i < sm->n_params; i++) {
        const ParamInfo *pi = &sm->params[i];
        int ndim;
        shape_of(pi, shapes[i], &ndim);
        for (int k = 0; k < n_sets; k++) {   // a parameter's tensors side by side
            const int j = i * n_sets + k;
            snprintf(names[j], sizeof names[j], "%.100s%s", pi->name, sets[k].suffix);
            t[j] = (SafetensorsWriteTensor){.name = names[j], .dtype = bf16 ? ST_BF16 : ST_F32, .ndim = ndim,
                                            .shape = shapes[i],
                                            .data = bf16 ? (const void *)(half + k * sm->numel + pi->offset)
                                                         : (const void *)(sets[k].base + pi->offset)};
        }
    }
    const SafetensorsMeta meta[] = {{"format", "pt"}, {"pptrain", kind}};
    const int rc = safetensors_write_hashed(path, n, t, kind ? 2 : 1, meta, written ? written->sha256 : NULL,
                                            written ? &written->bytes : NULL, err);
    free(t);
    free(names);
    free(shapes);
    free(half);
    return rc;
}

int ckpt_write_stage_file(const char *dir, const Pipeline *p, int s, bool optimizer, CkptFile *f, Error *err) {
    const StageModel *sm = pipeline_stage(p, s);
    const AdamWState *st = pipeline_stage_optimizer(p, s);
    assert(sm && st);
    const int S = pipeline_n_stages(p);
    char path[4400];
    *f = (CkptFile){.stage = s};
    ckpt_shard_name(f->path, sizeof f->path, optimizer ? "optimizer" : "model", s, S);
    join(path, sizeof path, dir, f->path);
    const CkptParamSet weights = {sm->weights, ""};
    // Both moments in one file, under torch's names; they share the weights' offsets.
    const CkptParamSet moments[] = {{st->m, ".exp_avg"}, {st->v, ".exp_avg_sq"}};
    return optimizer ? ckpt_write_params(path, sm, moments, 2, false, "optimizer", f, err)
                     : ckpt_write_params(path, sm, &weights, 1, false, "weights", f, err);
}

int ckpt_write_shards(const char *dir, const Pipeline *p, char **records, Error *err) {
    Text rec = {0};
    text_add(&rec, "%s", "");
    *records = NULL;
    if (pipeline_replica(p) != 0) {   // the replicas hold equal copies
        *records = rec.buf;
        return 0;
    }
    int rc = 0;
    for (int s = 0; s < pipeline_n_stages(p) && rc == 0; s++) {
        const StageModel *sm = pipeline_stage(p, s);
        if (!sm) continue;
        for (int k = 0; k < 2 && rc == 0; k++) {
            CkptFile f;
            rc = ckpt_write_stage_file(dir, p, s, k == 1, &f, err);
            char path[4400];
            struct stat sb;
            join(path, sizeof path, dir, f.path);
            if (rc == 0 && stat(path, &sb) != 0) {
                error_set(err, "%s: cannot stat it after writing it: %s", path, strerror(errno));
                rc = -1;
            }
            // Its identity too: a replica that sees this very file (a shared folder) need not read it.
            if (rc == 0)
                text_add(&rec, "file %s %lld %s %d %llu %lld.%09ld\n", f.path, (long long)f.bytes, f.sha256, s,
                         (unsigned long long)sb.st_ino, (long long)sb.st_mtim.tv_sec, (long)sb.st_mtim.tv_nsec);
            // The index's weight_map: every tensor of the weights shard, in the file's order.
            for (int i = 0; i < sm->n_params && rc == 0 && k == 0; i++)
                text_add(&rec, "tensor %s %lld\n", sm->params[i].name, (long long)(sm->params[i].numel * sizeof(float)));
        }
    }
    if (rc) free(rec.buf);
    else *records = rec.buf;
    return rc;
}

// The records of every process, in any order: the shards' files and the weights' tensors.
typedef struct {
    CkptFile *files;        // (2 S) model then optimizer of stage k at [2k], [2k+1]
    Text weight_map;        // "name\tfile\n" per tensor, stage order
    double total_size;      // bytes of every weight tensor
} ShardRecords;

static int parse_records(const char *records, int S, ShardRecords *out, Error *err) {
    out->files = xcalloc((size_t)(2 * S), sizeof(CkptFile));
    Text *tensors = xcalloc((size_t)S, sizeof(Text));   // per stage, so the map is in stage order
    int stage = -1, rc = 0;
    for (const char *line = records; rc == 0 && *line;) {
        const char *nl = strchr(line, '\n');
        const size_t len = nl ? (size_t)(nl - line) : strlen(line);
        char l[512], name[256], sha[65];
        long long bytes;
        int st;
        snprintf(l, sizeof l, "%.*s", (int)(len < sizeof l ? len : sizeof l - 1), line);
        if (sscanf(l, "file %255s %lld %64s %d", name, &bytes, sha, &st) == 4 && st >= 0 && st < S) {
            CkptFile *f = &out->files[2 * st + (strncmp(name, "optimizer-", 10) == 0)];
            *f = (CkptFile){.bytes = bytes, .stage = st};
            snprintf(f->path, sizeof f->path, "%s", name);
            snprintf(f->sha256, sizeof f->sha256, "%s", sha);
            stage = strncmp(name, "model-", 6) == 0 ? st : -1;
        } else if (sscanf(l, "tensor %255s %lld", name, &bytes) == 2 && stage >= 0) {
            char shard[128];
            ckpt_shard_name(shard, sizeof shard, "model", stage, S);
            text_add(&tensors[stage], "%s\t%s\n", name, shard);
            out->total_size += (double)bytes;
        } else {
            error_set(err, "checkpoint records: bad line '%.80s'", l);
            rc = -1;
        }
        line += len + (nl != NULL);
    }
    for (int k = 0; k < 2 * S && rc == 0; k++)
        if (!out->files[k].path[0]) {
            char name[128];
            ckpt_shard_name(name, sizeof name, k % 2 ? "optimizer" : "model", k / 2, S);
            error_set(err, "checkpoint: no process reported writing %s", name);
            rc = -1;
        }
    text_add(&out->weight_map, "%s", "");
    for (int k = 0; k < S; k++) {
        if (tensors[k].buf) text_add(&out->weight_map, "%s", tensors[k].buf);
        free(tensors[k].buf);
    }
    free(tensors);
    return rc;
}

static int write_text_hashed(const char *dir, const char *name, char *text, CkptFile *f, Error *err);

// model.safetensors.index.json from the records: the root need not see a shard to know its
// tensors.
static int write_index(const char *dir, const ShardRecords *r, CkptFile *f, Error *err) {
    cJSON *root = cJSON_CreateObject();
    cJSON *meta = cJSON_AddObjectToObject(root, "metadata");
    cJSON *map = cJSON_AddObjectToObject(root, "weight_map");
    for (const char *line = r->weight_map.buf; *line;) {
        const char *tab = strchr(line, '\t'), *nl = strchr(tab, '\n');
        char name[256], shard[128];
        snprintf(name, sizeof name, "%.*s", (int)(tab - line), line);
        snprintf(shard, sizeof shard, "%.*s", (int)(nl - tab - 1), tab + 1);
        cJSON_AddStringToObject(map, name, shard);
        line = nl + 1;
    }
    cJSON_AddNumberToObject(meta, "total_size", r->total_size);
    char *text = cJSON_Print(root);
    cJSON_Delete(root);
    return write_text_hashed(dir, CKPT_INDEX_FILE, check_alloc(text, 1, __FILE__, __LINE__), f, err);
}

static int write_text(const char *dir, const char *name, char *text, Error *err) {
    return write_text_hashed(dir, name, text, NULL, err);
}

// dir/name from text (freed here), and its record in *f when f is not NULL.
static int write_text_hashed(const char *dir, const char *name, char *text, CkptFile *f, Error *err) {
    char path[4400];
    join(path, sizeof path, dir, name);
    AtomicFile *af = atomic_file_open(path, err);
    int rc = af ? atomic_file_append(af, text, strlen(text), err) : -1;
    if (af && rc) atomic_file_abort(af);
    if (f) *f = (CkptFile){.stage = -1};
    if (f) snprintf(f->path, sizeof f->path, "%s", name);
    if (af && rc == 0) rc = atomic_file_commit_hashed(af, f ? f->sha256 : NULL, f ? &f->bytes : NULL, err);
    free(text);
    return rc;
}

static char *u64_text(char *buf, size_t cap, uint64_t x) {
    snprintf(buf, cap, "%llu", (unsigned long long)x);
    return buf;
}

static char *state_json(const CkptState *st, double lr_next) {
    cJSON *root = cJSON_CreateObject();
    char buf[32];
    cJSON_AddStringToObject(root, "format", "pptrain-checkpoint");
    cJSON_AddNumberToObject(root, "version", 1);
    cJSON_AddNumberToObject(root, "step", st->step);
    cJSON_AddNumberToObject(root, "adam_step", st->adam_step);
    cJSON *cur = cJSON_AddObjectToObject(root, "data_cursor");
    cJSON_AddStringToObject(cur, "epoch", u64_text(buf, sizeof buf, st->cursor.epoch));
    cJSON_AddStringToObject(cur, "index", u64_text(buf, sizeof buf, st->cursor.index));
    // The only randomness after initialization is the data order, a function of (seed, epoch).
    cJSON *rng = cJSON_AddObjectToObject(root, "rng");
    cJSON_AddStringToObject(rng, "seed", u64_text(buf, sizeof buf, st->rc.seed));
    cJSON_AddStringToObject(rng, "data_order", "permutation of (seed, epoch); position in data_cursor");
    cJSON *lr = cJSON_AddObjectToObject(root, "lr_schedule");
    cJSON_AddNumberToObject(lr, "step", st->step);
    cJSON_AddNumberToObject(lr, "total_steps", st->rc.optim.total_steps);
    cJSON_AddNumberToObject(lr, "next_lr", lr_next);
    cJSON_AddNumberToObject(root, "run_id", (double)st->run_id);
    char *run = run_json(&st->rc, &st->po);
    cJSON_AddItemToObject(root, "run", cJSON_Parse(run));
    free(run);
    cJSON *files = cJSON_AddArrayToObject(root, "files");
    for (int i = 0; i < st->n_files; i++) {
        cJSON *f = cJSON_CreateObject();
        cJSON_AddStringToObject(f, "path", st->files[i].path);
        cJSON_AddNumberToObject(f, "bytes", (double)st->files[i].bytes);
        cJSON_AddStringToObject(f, "sha256", st->files[i].sha256);
        cJSON_AddNumberToObject(f, "stage", st->files[i].stage);
        cJSON_AddItemToArray(files, f);
    }
    char *text = cJSON_Print(root);
    cJSON_Delete(root);
    return check_alloc(text, 1, __FILE__, __LINE__);
}

// checksums.sha256 over every file and the state's text, then trainer_state.json itself: the
// folder is complete (has the state) only once it is sealed.
static int write_sealed_state(const char *dir, const CkptState *st, double lr_next, Error *err) {
    char *text = state_json(st, lr_next);
    char sha256[65];
    buffer_sha256(text, strlen(text), sha256);
    if (ckpt_seal_write(dir, st->files, st->n_files, sha256, err)) {
        free(text);
        return -1;
    }
    return write_text(dir, CKPT_STATE_FILE, text, err);
}

int ckpt_write_manifest(const char *dir, const char *records, const RunConfig *rc, const PipelineOptions *po,
                        int n_stages, const TrainPosition *pos, int adam_step, int64_t run_id,
                        const char *identity_src, CkptState *out, Error *err) {
    CkptState st = {.step = pos->step, .adam_step = adam_step, .cursor = pos->cursor, .rc = *rc, .po = *po,
                    .run_id = run_id,
                    .files = xcalloc((size_t)(2 * n_stages + 2 + IDENTITY_N_FILES), sizeof(CkptFile))};
    ShardRecords r = {0};
    int rc_w = parse_records(records, n_stages, &r, err);
    if (rc_w == 0) {
        memcpy(st.files, r.files, (size_t)(2 * n_stages) * sizeof(CkptFile));
        st.n_files = 2 * n_stages;
        rc_w = write_index(dir, &r, &st.files[st.n_files++], err) ||
               write_text_hashed(dir, CKPT_CONFIG_FILE, model_config_to_hf_json(&rc->model, "float32"),
                                 &st.files[st.n_files++], err) ||
               identity_copy(identity_src, dir, st.files, &st.n_files, err);
    }
    free(r.files);
    free(r.weight_map.buf);
    if (rc_w == 0) rc_w = write_sealed_state(dir, &st, optim_lr_at(&rc->optim, pos->step), err);
    if (rc_w || !out) ckpt_state_clear(&st);
    else *out = st;
    return rc_w ? -1 : 0;
}

void ckpt_state_clear(CkptState *st) {
    free(st->files);
    st->files = NULL;
    st->n_files = 0;
}

// ---- reading ----------------------------------------------------------------------------------

static const cJSON *need(const cJSON *obj, const char *key, int type_string, const char *path, Error *err) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
    const bool ok = type_string == 1 ? cJSON_IsString(v) : type_string == 0 ? cJSON_IsNumber(v) : cJSON_IsObject(v) || cJSON_IsArray(v);
    if (!ok) error_set(err, "%s: \"%s\" is missing or has the wrong type", path, key);
    return ok ? v : NULL;
}

// A whole number in [0, max], or -1 with err naming the key and the range.
static int whole_in_range(const cJSON *v, const char *key, double max, const char *path, Error *err) {
    const double x = v->valuedouble;
    if (x >= 0 && x <= max && x == floor(x)) return (int)x;
    error_set(err, "%s: \"%s\" is %.17g, not a whole number from 0 to %.17g", path, key, x, max);
    return -1;
}

// The position fields against the run they belong to, so a hand-edited or corrupted state is
// refused with its field named instead of training from a nonsense position (a negative step
// sends the learning-rate schedule below zero; a far cursor trains other batches). Every step
// takes B items, so after `step` steps neither the epoch nor the index within it can exceed
// step x B; AdamW has taken one step per training step.
static int check_position(const CkptState *st, const char *path, Error *err) {
    const double taken = (double)st->step * (double)st->rc.batch;
    if (st->step > st->rc.steps) {
        error_set(err, "%s: \"step\" %d lies past the run's %d steps", path, st->step, st->rc.steps);
        return -1;
    }
    if (st->adam_step > st->step) {
        error_set(err, "%s: \"adam_step\" %d exceeds \"step\" %d", path, st->adam_step, st->step);
        return -1;
    }
    if ((double)st->cursor.epoch > taken || (double)st->cursor.index > taken) {
        error_set(err, "%s: data_cursor (epoch %llu, index %llu) lies beyond the %.0f items %d steps of %d take", path,
                  (unsigned long long)st->cursor.epoch, (unsigned long long)st->cursor.index, taken, st->step,
                  st->rc.batch);
        return -1;
    }
    return 0;
}

static int parse_u64(const cJSON *v, uint64_t *out) {
    if (!v) return -1;
    char *end = NULL;
    errno = 0;
    *out = strtoull(v->valuestring, &end, 10);
    return *v->valuestring && !*end && errno == 0 ? 0 : -1;
}

static int parse_files(const cJSON *arr, CkptState *st, const char *path, Error *err) {
    const int n = cJSON_GetArraySize(arr);
    st->files = xcalloc((size_t)(n > 0 ? n : 1), sizeof(CkptFile));
    const cJSON *f;
    cJSON_ArrayForEach(f, arr) {
        const cJSON *p = need(f, "path", 1, path, err), *b = p ? need(f, "bytes", 0, path, err) : NULL;
        const cJSON *h = b ? need(f, "sha256", 1, path, err) : NULL, *s = h ? need(f, "stage", 0, path, err) : NULL;
        if (!s) return -1;
        CkptFile *cf = &st->files[st->n_files++];
        if (strchr(p->valuestring, '/') || strlen(p->valuestring) >= sizeof cf->path || strlen(h->valuestring) != 64) {
            error_set(err, "%s: bad file entry '%.60s'", path, p->valuestring);
            return -1;
        }
        snprintf(cf->path, sizeof cf->path, "%s", p->valuestring);
        snprintf(cf->sha256, sizeof cf->sha256, "%s", h->valuestring);
        if (!(b->valuedouble >= 0 && b->valuedouble < 9e15)) {
            error_set(err, "%s: bad size for '%.60s'", path, p->valuestring);
            return -1;
        }
        cf->bytes = (int64_t)b->valuedouble;
        cf->stage = s->valueint;
    }
    return 0;
}

int ckpt_read_state(const char *dir, CkptState *out, Error *err) {
    char path[4400];
    join(path, sizeof path, dir, CKPT_STATE_FILE);
    memset(out, 0, sizeof *out);
    char *text = file_read_text(path, MAX_JSON_BYTES, err);
    if (!text) return -1;
    const int rc = ckpt_state_parse(text, path, out, err);
    free(text);
    return rc;
}

int ckpt_state_parse(const char *text, const char *path, CkptState *out, Error *err) {
    memset(out, 0, sizeof *out);
    cJSON *root = json_parse_object(text, strlen(text), path, err);
    int rc = -1;
    if (!root) return -1;
    const cJSON *fmt = cJSON_GetObjectItemCaseSensitive(root, "format");
    if (!cJSON_IsString(fmt) || strcmp(fmt->valuestring, "pptrain-checkpoint") != 0) {
        error_set(err, "%s: not a pptrain trainer state", path);
        goto out;
    }
    const cJSON *step = need(root, "step", 0, path, err), *adam = step ? need(root, "adam_step", 0, path, err) : NULL;
    const cJSON *cur = adam ? need(root, "data_cursor", 2, path, err) : NULL;
    const cJSON *run = cur ? need(root, "run", 2, path, err) : NULL;
    const cJSON *files = run ? need(root, "files", 2, path, err) : NULL;
    const cJSON *run_id = files ? need(root, "run_id", 0, path, err) : NULL;
    if (!run_id) goto out;
    if ((out->step = whole_in_range(step, "step", 1e8, path, err)) < 0 ||
        (out->adam_step = whole_in_range(adam, "adam_step", 1e8, path, err)) < 0)
        goto out;
    if (!(run_id->valuedouble >= 0 && run_id->valuedouble < 9e15)) {
        error_set(err, "%s: bad run_id", path);
        goto out;
    }
    out->run_id = (int64_t)run_id->valuedouble;
    if (parse_u64(need(cur, "epoch", 1, path, err), &out->cursor.epoch) ||
        parse_u64(need(cur, "index", 1, path, err), &out->cursor.index)) {
        error_set(err, "%s: bad data_cursor", path);
        goto out;
    }
    out->rc = run_config_defaults();
    out->po = pipeline_options_defaults();
    char *run_text = cJSON_PrintUnformatted(run);
    const int prc = run_json_parse(check_alloc(run_text, 1, __FILE__, __LINE__), path, &out->rc, &out->po, err);
    free(run_text);
    if (prc == 0 && check_position(out, path, err) == 0 && parse_files(files, out, path, err) == 0) rc = 0;
out:
    cJSON_Delete(root);
    if (rc) ckpt_state_clear(out);
    return rc;
}

int ckpt_verify_files(const char *dir, const CkptFile *files, int n, bool shards, Error *err) {
    for (int i = 0; i < n; i++) {
        if (!shards && ckpt_is_shard(files[i].path)) continue;
        char path[4400], hex[65];
        join(path, sizeof path, dir, files[i].path);
        struct stat sb;
        if (stat(path, &sb) != 0) {
            error_set(err, "%s: %s is missing", dir, files[i].path);
            return -1;
        }
        if ((int64_t)sb.st_size != files[i].bytes) {
            error_set(err, "%s: %s has %lld bytes, the manifest says %lld", dir, files[i].path, (long long)sb.st_size,
                      (long long)files[i].bytes);
            return -1;
        }
        int64_t bytes;
        if (file_sha256(path, hex, &bytes, err)) return -1;
        if (strcmp(hex, files[i].sha256) != 0) {
            error_set(err, "%s: %s: sha256 does not match the manifest", dir, files[i].path);
            return -1;
        }
    }
    return 0;
}

struct Checkpoint {
    char dir[4096];
    CkptOpenCheck check;
    bool has_state;
    CkptState state;
    ModelConfig model;
    int n_model, n_optim;
    SafetensorsFile **model_files, **optim_files;   // NULL: absent from this folder (CHECK_ON_READ)
    char **model_names, **optim_names;
    bool *model_checked, *optim_checked;            // sha256 checked against the manifest
    char note[512];                                 // a warning for the user ("" = none)
};

static int open_shards(Checkpoint *c, const char *const *names, int n, SafetensorsFile ***out, char ***out_names,
                       bool **checked, Error *err) {
    *out = xcalloc((size_t)(n > 0 ? n : 1), sizeof **out);
    *out_names = xcalloc((size_t)(n > 0 ? n : 1), sizeof **out_names);
    *checked = xcalloc((size_t)(n > 0 ? n : 1), sizeof **checked);
    for (int i = 0; i < n; i++) (*out_names)[i] = check_alloc(strdup(names[i]), 1, __FILE__, __LINE__);
    for (int i = 0; i < n; i++) {
        char path[4400];
        join(path, sizeof path, c->dir, names[i]);
        struct stat sb;
        // Another node's shard: an error only if this process reads from it (ckpt_tensor_source).
        if (c->check == CKPT_OPEN_CHECK_ON_READ && ckpt_is_shard(names[i]) && stat(path, &sb) != 0 && errno == ENOENT)
            continue;
        if (!((*out)[i] = safetensors_open(path, err))) return -1;
    }
    return 0;
}

// The shard files an index names (each once, in first-seen order).
static int index_files(const char *dir, char ***names, int *n, Error *err) {
    char path[4400];
    join(path, sizeof path, dir, CKPT_INDEX_FILE);
    char *text = file_read_text(path, MAX_JSON_BYTES, err);
    if (!text) return -1;
    cJSON *root = json_parse_object(text, strlen(text), path, err);
    free(text);
    if (!root) return -1;
    const cJSON *map = cJSON_GetObjectItemCaseSensitive(root, "weight_map");
    if (!cJSON_IsObject(map)) {
        error_set(err, "%s: no \"weight_map\" object", path);
        cJSON_Delete(root);
        return -1;
    }
    *names = xcalloc((size_t)cJSON_GetArraySize(map) + 1, sizeof(char *));
    *n = 0;
    const cJSON *e;
    int rc = 0;
    cJSON_ArrayForEach(e, map) {
        if (!cJSON_IsString(e) || strchr(e->valuestring, '/')) {
            error_set(err, "%s: \"%s\" maps to no plain file name", path, e->string);
            rc = -1;
            break;
        }
        bool seen = false;
        for (int i = 0; i < *n; i++) seen |= strcmp((*names)[i], e->valuestring) == 0;
        if (!seen) (*names)[(*n)++] = strdup(e->valuestring);
    }
    cJSON_Delete(root);
    return rc;
}

static void free_names(char **names, int n) {
    for (int i = 0; i < n; i++) free(names[i]);
    free(names);
}

static int open_model_files(Checkpoint *c, Error *err) {
    char path[4400];
    join(path, sizeof path, c->dir, CKPT_INDEX_FILE);
    struct stat sb;
    if (stat(path, &sb) == 0) {
        char **names = NULL;
        int n = 0;
        int rc = index_files(c->dir, &names, &n, err);
        if (rc == 0)
            rc = open_shards(c, (const char *const *)names, c->n_model = n, &c->model_files, &c->model_names,
                             &c->model_checked, err);
        free_names(names, n);
        return rc;
    }
    join(path, sizeof path, c->dir, "model.safetensors");
    if (stat(path, &sb) != 0) {
        error_set(err, "%s: neither %s nor model.safetensors is there", c->dir, CKPT_INDEX_FILE);
        return -1;
    }
    const char *single[] = {"model.safetensors"};
    return open_shards(c, single, c->n_model = 1, &c->model_files, &c->model_names, &c->model_checked, err);
}

// The folder's tensor with this name, or NULL.
static const SafetensorsTensor *find_weight(const Checkpoint *c, const char *name) {
    for (int i = 0; i < c->n_model; i++) {
        const SafetensorsTensor *t = c->model_files[i] ? safetensors_find(c->model_files[i], name) : NULL;
        if (t) return t;
    }
    return NULL;
}

// A config that ties the embeddings, in a folder whose lm_head.weight is not the embedding:
// transformers 5 then warns and unties them (it ties only equal tensors), so the model it
// loads uses that lm_head. pptrain does the same, so both compute one model, and says so; the
// checkpoints and exports then carry tie_word_embeddings false, which transformers loads
// without a warning. An lm_head equal to the embedding (torch .bin-era folders store both)
// stays tied.
static int untie_if_different(Checkpoint *c, Error *err) {
    if (!c->model.tie_word_embeddings) return 0;
    const SafetensorsTensor *head = find_weight(c, "lm_head.weight"), *emb = find_weight(c, "model.embed_tokens.weight");
    if (!head || !emb) return 0;
    bool same = head->numel == emb->numel;
    float *a = same ? xmalloc(head->numel * sizeof(float)) : NULL, *b = same ? xmalloc(emb->numel * sizeof(float)) : NULL;
    int rc = same && (safetensors_to_f32(head, a, head->numel, err) || safetensors_to_f32(emb, b, emb->numel, err)) ? -1 : 0;
    if (rc == 0 && same) same = memcmp(a, b, head->numel * sizeof(float)) == 0;
    free(a);
    free(b);
    if (rc || same) return rc;
    c->model.tie_word_embeddings = false;
    snprintf(c->note, sizeof c->note, "%.200s: config.json ties the embeddings, but lm_head.weight differs from "
             "model.embed_tokens.weight: untied, as transformers does (set tie_word_embeddings to false to silence this)",
             c->dir);
    return 0;
}

// ---- tensors the model does not use ----------------------------------------------------------
// Weights are read by name (ckpt_tensor_source), so a tensor no name asks for would be dropped
// without a word: a folder of 8 layers under a config.json of 4 would train as a 4-layer model.
// Every tensor of the folder's model files must be one of the model's (model_param_infos), or
// one of the harmless tensors real Llama checkpoints carry.

#define ROTARY_INV_FREQ "self_attn.rotary_emb.inv_freq"

static int by_param_name(const void *a, const void *b) {
    return strcmp(((const ParamInfo *)a)->name, ((const ParamInfo *)b)->name);
}

// The model's tensors sorted by name, for in_params.
static ParamInfo *sorted_params(const ModelConfig *m, int *n) {
    ParamInfo *p = model_param_infos(m, n);
    qsort(p, (size_t)*n, sizeof *p, by_param_name);
    return p;
}

static bool in_params(const ParamInfo *p, int n, const char *name) {
    ParamInfo key;
    const size_t len = strlen(name);
    if (len >= sizeof key.name) return false;   // longer than any parameter's name
    memcpy(key.name, name, len + 1);
    return bsearch(&key, p, (size_t)n, sizeof *p, by_param_name) != NULL;
}

// "model.layers.N.REST": N (-1 when the name is not a layer's) and REST.
static long layer_of(const char *name, const char **rest) {
    const char prefix[] = "model.layers.";
    const char *s = name + sizeof prefix - 1;
    if (strncmp(name, prefix, sizeof prefix - 1) != 0 || *s < '0' || *s > '9' || (*s == '0' && s[1] != '.'))
        return -1;
    long n = 0;
    for (; *s >= '0' && *s <= '9'; s++) {
        if (n > 99999999L) return -1;   // no model has that many layers
        n = n * 10 + (*s - '0');
    }
    if (*s != '.') return -1;
    *rest = s + 1;
    return n;
}

// Tensors transformers ignores too: the rotary inverse frequencies, which pptrain computes from
// config.json (older transformers saved one per layer; later ones keep one model-level buffer and
// do not save it, a tool that did is just as harmless); lm_head.weight beside a config that ties
// it (untie_if_different kept it tied: it equals the embedding).
static bool harmless(const ModelConfig *m, const char *name) {
    const char *rest;
    const long layer = layer_of(name, &rest);
    if (layer >= 0 && layer < m->layers && strcmp(rest, ROTARY_INV_FREQ) == 0) return true;
    return strcmp(name, "model.rotary_emb.inv_freq") == 0 ||
           (m->tie_word_embeddings && strcmp(name, "lm_head.weight") == 0);
}

// Why the model does not use this tensor: a layer config.json does not have, a bias it turns
// off, or no tensor of a Llama model at all.
static void why_unused(const ModelConfig *m, const char *name, char *why, size_t cap) {
    const char *rest;
    const long layer = layer_of(name, &rest);
    snprintf(why, cap, "not a tensor of a Llama model");
    if (layer < 0) return;
    char first[200];
    snprintf(first, sizeof first, "model.layers.0.%s", rest);
    ModelConfig one = *m;   // one layer with every bias: each tensor a layer can hold
    one.layers = 1;
    one.attention_bias = one.mlp_bias = true;
    int n_all, n_attn;
    ParamInfo *all = sorted_params(&one, &n_all);
    one.mlp_bias = false;
    ParamInfo *attn = sorted_params(&one, &n_attn);
    const bool in_layer = strcmp(rest, ROTARY_INV_FREQ) == 0 || in_params(all, n_all, first);
    if (in_layer && layer >= m->layers)
        snprintf(why, cap, "config.json says %d layer%s", m->layers, m->layers == 1 ? "" : "s");
    else if (in_params(attn, n_attn, first)) snprintf(why, cap, "config.json says attention_bias false");
    else if (in_params(all, n_all, first)) snprintf(why, cap, "config.json says mlp_bias false");
    free(all);
    free(attn);
}

// Refuses a folder whose model files hold a tensor the model does not use, naming the first (in
// file order), how many more there are, and why. A file this process does not have
// (CKPT_OPEN_CHECK_ON_READ) is not looked at.
static int refuse_unused(const Checkpoint *c, Error *err) {
    int n_used;
    ParamInfo *used = sorted_params(&c->model, &n_used);
    const SafetensorsFile *first_file = NULL;
    const char *first = NULL;
    int unused = 0;
    for (int i = 0; i < c->n_model; i++)
        for (int k = 0; c->model_files[i] && k < safetensors_count(c->model_files[i]); k++) {
            const char *name = safetensors_tensor(c->model_files[i], k)->name;
            if (in_params(used, n_used, name) || harmless(&c->model, name)) continue;
            if (!unused++) {
                first_file = c->model_files[i];
                first = name;
            }
        }
    free(used);
    if (!unused) return 0;
    char why[160], more[64] = "";
    why_unused(&c->model, first, why, sizeof why);
    if (unused > 1) snprintf(more, sizeof more, " and %d more", unused - 1);
    error_set(err, "%s: tensor '%s'%s %s not used: %s", safetensors_path(first_file), first, more,
              unused > 1 ? "are" : "is", why);
    return -1;
}

Checkpoint *ckpt_open(const char *dir, bool need_state, CkptOpenCheck check, Error *err) {
    Checkpoint *c = xcalloc(1, sizeof *c);
    snprintf(c->dir, sizeof c->dir, "%s", dir);
    c->check = check;
    char path[4400];
    struct stat sb;
    if (stat(dir, &sb) != 0 || !S_ISDIR(sb.st_mode)) {
        error_set(err, "%s: no such checkpoint folder", dir);
        goto fail;
    }
    join(path, sizeof path, dir, CKPT_STATE_FILE);
    c->has_state = stat(path, &sb) == 0;
    if (!c->has_state && need_state) {
        error_set(err, "%s: not a complete checkpoint (no %s)", dir, CKPT_STATE_FILE);
        goto fail;
    }
    if (c->has_state && ckpt_read_state(dir, &c->state, err)) goto fail;
    if (c->has_state && check == CKPT_OPEN_VERIFY &&
        (ckpt_seal_verify(dir, err) < 0 || ckpt_verify_files(dir, c->state.files, c->state.n_files, true, err)))
        goto fail;
    join(path, sizeof path, dir, CKPT_CONFIG_FILE);
    if (model_config_from_json(&c->model, path, err)) goto fail;
    if (c->has_state) snprintf(c->model.name, sizeof c->model.name, "%s", c->state.rc.model.name);
    if (open_model_files(c, err) || untie_if_different(c, err) || refuse_unused(c, err) || identity_check(dir, err))
        goto fail;
    if (c->has_state) {
        const char *names[8192];
        int n = 0;
        for (int i = 0; i < c->state.n_files && n < 8192; i++)
            if (strncmp(c->state.files[i].path, "optimizer-", 10) == 0) names[n++] = c->state.files[i].path;
        if (open_shards(c, names, c->n_optim = n, &c->optim_files, &c->optim_names, &c->optim_checked, err))
            goto fail;
    }
    return c;
fail:
    ckpt_close(c);
    return NULL;
}

void ckpt_close(Checkpoint *c) {
    if (!c) return;
    for (int i = 0; c->model_files && i < c->n_model; i++) safetensors_close(c->model_files[i]);
    for (int i = 0; c->optim_files && i < c->n_optim; i++) safetensors_close(c->optim_files[i]);
    free(c->model_files);
    free(c->optim_files);
    for (int i = 0; c->model_names && i < c->n_model; i++) free(c->model_names[i]);
    for (int i = 0; c->optim_names && i < c->n_optim; i++) free(c->optim_names[i]);
    free(c->model_names);
    free(c->optim_names);
    free(c->model_checked);
    free(c->optim_checked);
    ckpt_state_clear(&c->state);
    free(c);
}

const char *ckpt_dir(const Checkpoint *c) { return c->dir; }
const CkptState *ckpt_state(const Checkpoint *c) { return c->has_state ? &c->state : NULL; }
const ModelConfig *ckpt_model(const Checkpoint *c) { return &c->model; }
const char *ckpt_note(const Checkpoint *c) { return c->note; }

// CHECK_ON_READ: the shard's sha256 against the manifest, the first time a tensor is read from it.
static int check_shard_once(Checkpoint *c, const char *name, bool *checked, Error *err) {
    if (c->check != CKPT_OPEN_CHECK_ON_READ || *checked) return 0;
    for (int i = 0; i < c->state.n_files; i++)
        if (strcmp(c->state.files[i].path, name) == 0) {
            if (ckpt_verify_files(c->dir, &c->state.files[i], 1, true, err)) return -1;
            *checked = true;
            return 0;
        }
    error_set(err, "%s: %s is not in the manifest", c->dir, name);
    return -1;
}

// The shard this folder lacks that holds the tensor (the index names its weights' shard; its
// moments are in the optimizer shard of the same stage). False when no absent shard holds it.
static bool absent_holder(const Checkpoint *c, const char *name, TensorRole role, char *shard, size_t cap) {
    char path[4400];
    join(path, sizeof path, c->dir, CKPT_INDEX_FILE);
    Error ignored;
    char *text = file_read_text(path, MAX_JSON_BYTES, &ignored);
    cJSON *root = text ? json_parse_object(text, strlen(text), path, &ignored) : NULL;
    free(text);
    const cJSON *file = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(root, "weight_map"), name);
    bool found = false;
    if (cJSON_IsString(file) && strncmp(file->valuestring, "model-", 6) == 0) {
        if (role == TENSOR_WEIGHT) snprintf(shard, cap, "%s", file->valuestring);
        else snprintf(shard, cap, "optimizer-%s", file->valuestring + 6);
        char *const *names = role == TENSOR_WEIGHT ? c->model_names : c->optim_names;
        SafetensorsFile *const *files = role == TENSOR_WEIGHT ? c->model_files : c->optim_files;
        const int n = role == TENSOR_WEIGHT ? c->n_model : c->n_optim;
        for (int i = 0; i < n; i++) found |= !files[i] && strcmp(names[i], shard) == 0;
    }
    cJSON_Delete(root);
    return found;
}

// A NaN or Inf in a tensor read is refused here, by name, rather than found at step 1 as a
// NaN loss that the hint blames on the learning rate.
static int check_finite(const Checkpoint *c, const char *file, const char *key, const float *x, size_t n, Error *err) {
    for (size_t i = 0; i < n; i++)
        if (!isfinite(x[i])) {
            error_set(err, "%s: %s: tensor %s holds %s at element %zu: weights must be finite", c->dir, file, key,
                      isnan(x[i]) ? "NaN" : "Inf", i);
            return -1;
        }
    return 0;
}

int ckpt_tensor_source(void *ctx, const char *name, TensorRole role, const ParamInfo *info, float *dst, Error *err) {
    Checkpoint *c = ctx;
    char key[160];
    snprintf(key, sizeof key, "%s%s", name, role == TENSOR_EXP_AVG ? ".exp_avg" : role == TENSOR_EXP_AVG_SQ ? ".exp_avg_sq" : "");
    SafetensorsFile **files = role == TENSOR_WEIGHT ? c->model_files : c->optim_files;
    char **names = role == TENSOR_WEIGHT ? c->model_names : c->optim_names;
    bool *checked = role == TENSOR_WEIGHT ? c->model_checked : c->optim_checked;
    const int n = role == TENSOR_WEIGHT ? c->n_model : c->n_optim;
    for (int i = 0; i < n; i++) {
        const SafetensorsTensor *t = files[i] ? safetensors_find(files[i], key) : NULL;
        if (!t) continue;
        if (check_shard_once(c, names[i], &checked[i], err)) return -1;
        int64_t shape[2];
        int ndim;
        shape_of(info, shape, &ndim);
        if (!safetensors_expect(files[i], key, ndim, shape, err)) return -1;
        if (safetensors_to_f32(t, dst, info->numel, err)) return -1;
        return check_finite(c, names[i], key, dst, info->numel, err);
    }
    char shard[300];
    if (absent_holder(c, name, role, shard, sizeof shard))
        error_set(err, "%s: %s is not in this folder and this process needs it (for %s): the checkpoint was written "
                       "to folders the ranks did not share; resume it under the layout that wrote it (leave out "
                       "--stages, --virtual, --schedule, --split and --dp; it had --stages %d --dp %d) with each "
                       "rank's own folder, or copy every rank's shards into one folder", c->dir, shard, key,
                  c->state.po.ranks, c->state.po.dp);
    else if (role != TENSOR_WEIGHT && !c->has_state)
        error_set(err, "%s: a Hugging Face folder has no optimizer state (use --init-from for it)", c->dir);
    else error_set(err, "%s: no tensor '%s'", c->dir, key);
    return -1;
}

StageModel *ckpt_load_model(Checkpoint *c, Error *err) {
    StageModel *sm = stage_create(&c->model, 0, c->model.layers, true, true, 0, err);
    if (!sm) return NULL;
    for (int i = 0; i < sm->n_params; i++)
        if (ckpt_tensor_source(c, sm->params[i].name, TENSOR_WEIGHT, &sm->params[i], sm->weights + sm->params[i].offset, err)) {
            stage_free(sm);
            return NULL;
        }
    stage_sync_head_copy(sm);   // tied embeddings: the head reads the embedding's copy
    return sm;
}
