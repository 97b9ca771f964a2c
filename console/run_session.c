#include "console/run_session.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "engine/schedule/schedule.h"
#include "engine/transport/mpi_process.h"
#include "storage/checkpoint.h"
#include "storage/checkpoint_cleanup.h"
#include "storage/checkpoint_find.h"
#include "storage/checkpoint_ranks.h"
#include "storage/db_journal.h"
#include "storage/token_manifest.h"

// ---- where the run starts: --resume and --init-from ---------------------------------------------

// What a resumed run keeps from its checkpoint: changing any of these would make it another run.
static const char *const KEPT_ON_RESUME[] = {"--model", "--batching", "--batch", "--seq", "--seed",
                                             "--lr", "--min-lr", "--warmup", "--beta1", "--beta2",
                                             "--eps", "--weight-decay", "--grad-clip", "--init-from"};

// A resumed run writes its checkpoints where the run it continues wrote them (the folder that
// holds that run's run-N/step-S folders), at its interval, unless --ckpt-dir or --ckpt-every
// say otherwise: a resume without them must not run unprotected.
static void inherit_checkpoints(RunOptions *ro, const char *source_dir) {
    if (run_options_given(ro, "--ckpt-dir")) return;
    char dir[4096];
    snprintf(dir, sizeof dir, "%s", source_dir);
    for (int up = 0; up < 2; up++) {   // .../run-N/step-S -> ...; .../step-S -> ...
        char *slash = strrchr(dir, '/');
        if (!slash || slash == dir) return;   // no parent folder to name
        *slash = '\0';
        const char *last = strrchr(dir, '/');
        if (strncmp(last ? last + 1 : dir, "run-", 4)) break;
    }
    snprintf(ro->ckpt_dir, sizeof ro->ckpt_dir, "%s", dir);
}

int run_session_check_kept(const RunOptions *ro, Error *err) {
    for (size_t i = 0; i < sizeof KEPT_ON_RESUME / sizeof KEPT_ON_RESUME[0]; i++)
        if (run_options_given(ro, KEPT_ON_RESUME[i])) {
            error_set(err, "%s cannot be changed on --resume: a resumed run keeps its checkpoint's model, data "
                           "order, batch, sequence length and optimizer", KEPT_ON_RESUME[i]);
            return -1;
        }
    return 0;
}

// The checkpoint's run, laid out as the user now asks: layout flags, --steps and --data win.
static int merge_resumed(RunOptions *ro, const CkptState *st, bool weights_only, Error *err) {
    if (run_session_check_kept(ro, err)) return -1;
    RunConfig rc = st->rc;
    PipelineOptions po = st->po;
    if (run_options_given(ro, "--data")) snprintf(rc.data_path, sizeof rc.data_path, "%s", ro->rc.data_path);
    if (run_options_given(ro, "--tokenizer"))   // else the checkpoint's: its text is read the same way
        snprintf(rc.tokenizer_path, sizeof rc.tokenizer_path, "%s", ro->rc.tokenizer_path);
    if (run_options_given(ro, "--steps")) rc.steps = rc.optim.total_steps = ro->rc.steps;
    if (run_options_given(ro, "--ckpt-every")) rc.ckpt_every = ro->rc.ckpt_every;
    // Samples are not the run's state (a checkpoint keeps none): what this command line asks.
    rc.sample_every = ro->rc.sample_every;
    rc.sample_tokens = ro->rc.sample_tokens;
    memcpy(rc.sample_prompt, ro->rc.sample_prompt, sizeof rc.sample_prompt);
    // Nor is validation (a checkpoint keeps none of it): --val-data, --val-every and
    // --val-batches apply on --resume as on a fresh run.
    memcpy(rc.val_data_path, ro->rc.val_data_path, sizeof rc.val_data_path);
    rc.val_every = ro->rc.val_every;
    rc.val_batches = ro->rc.val_batches;
    if (run_options_given(ro, "--microbatches")) rc.microbatches = ro->rc.microbatches;
    const bool stages = run_options_given(ro, "--stages"), schedule = run_options_given(ro, "--schedule");
    if (stages) po.ranks = ro->pipe.ranks;
    if (schedule) snprintf(po.schedule, sizeof po.schedule, "%s", ro->pipe.schedule);
    if (run_options_given(ro, "--virtual") || schedule) po.virtual_stages = ro->pipe.virtual_stages;
    if (run_options_given(ro, "--split") || stages || schedule) snprintf(po.split, sizeof po.split, "%s", ro->pipe.split);
    if (run_options_given(ro, "--dp")) po.dp = ro->pipe.dp;
    if (run_options_given(ro, "--recompute")) po.recompute = ro->pipe.recompute;
    if (run_options_given(ro, "--timeout")) po.timeout_s = ro->pipe.timeout_s;
    // The device and precision are the checkpoint's unless given: a run on GPUs goes on there.
    if (run_options_given(ro, "--device")) po.device = ro->pipe.device;
    if (run_options_given(ro, "--precision")) po.gpu_fp32 = ro->pipe.gpu_fp32;
    po.transport = ro->pipe.transport;   // how this process was launched decides, not the checkpoint
    po.mpi_comm = ro->pipe.mpi_comm;
    if (st->step >= rc.steps && !weights_only) {
        if (run_options_given(ro, "--steps"))
            error_set(err, "--steps %d does not go past the checkpoint's step %d (give --steps N with N > %d)",
                      rc.steps, st->step, st->step);
        else
            error_set(err, "the checkpoint is at step %d, the end of its %d-step run (give --steps N to go on)",
                      st->step, rc.steps);
        return -1;
    }
    ro->rc = rc;
    ro->pipe = po;
    if (run_options_check_val(ro, err)) return -1;   // against the checkpoint's data, when --data is not given
    if (run_options_shape_from_csv(ro, err)) return -1;   // a CSV's P and M, as a fresh run takes them; V held to it
    return run_config_validate(&ro->rc, err);
}

static bool same_model(const ModelConfig *a, const ModelConfig *b) {
    return a->hidden == b->hidden && a->intermediate == b->intermediate && a->layers == b->layers &&
           a->heads == b->heads && a->kv_heads == b->kv_heads && a->head_dim == b->head_dim && a->vocab == b->vocab &&
           a->rope_theta == b->rope_theta && a->rms_eps == b->rms_eps &&
           a->tie_word_embeddings == b->tie_word_embeddings;
}

static int prepare_source(RunSession *s, Error *err) {
    RunOptions *ro = &s->ro;
    if (ro->resume[0] && ro->init_from[0]) {
        error_set(err, "--resume and --init-from exclude each other (a resumed run has its own weights)");
        return -1;
    }
    if (ro->resume[0]) {
        // What a run kept aside while the store was locked is recorded first, so that "latest"
        // and "RUN" find the checkpoints it wrote then (storage/db_journal.h). Every process of
        // an mpirun job does this before it looks: one replays, the others find it done.
        int replayed = 0;
        Error jerr;
        if (ro->db_path[0]) {
            const int rc = db_journal_replay_path(ro->db_path, &replayed, &jerr);
            db_journal_report(ro->db_path, rc, replayed, &jerr);
        }
        // One process reads every shard: it checks them all now, and a damaged one is named with
        // the newest good checkpoint. A process of an mpirun job may see only its node's shards
        // (--ckpt-dir on a node-local disk): it checks the rest now and each shard as it reads it,
        // as does a look at the options alone (options_only), whose run checks them all after.
        const bool check_shards = !transport_multi_process(ro->pipe.transport) && !s->options_only;
        Error warning;
        if (ckpt_find_resume(ro->resume, ro->db_path, check_shards, s->source_dir, sizeof s->source_dir,
                             &s->resumed_from, &warning, s->newest_intact ? &s->fell_back : NULL, err))
            return -1;
        if (warning.msg[0] && mpi_process_launch_rank() == 0) fprintf(stderr, "pptrain: warning: %s\n", warning.msg);
        s->source = ckpt_open(s->source_dir, true, check_shards ? CKPT_OPEN_TRUSTED : CKPT_OPEN_CHECK_ON_READ, err);
        if (!s->source) return -1;
        const CkptState *st = ckpt_state(s->source);
        s->start_step = st->step;
        if (!s->resumed_from) s->resumed_from = st->run_id;
        inherit_checkpoints(ro, s->source_dir);
        return merge_resumed(ro, st, s->weights_only, err);
    }
    if (ro->init_from[0]) {
        snprintf(s->source_dir, sizeof s->source_dir, "%s", ro->init_from);
        Error why;
        if (!(s->source = ckpt_open(ro->init_from, false, CKPT_OPEN_VERIFY, &why))) {
            // `sample FOLDER` sets init_from itself: its line names the folder, not a flag not typed
            if (run_options_given(ro, "--init-from")) error_set(err, "--init-from: %s", why.msg);
            else *err = why;
            return -1;
        }
        // Every rank reads the same folder and would say the same: rank 0 says it.
        if (ckpt_note(s->source)[0] && mpi_process_launch_rank() == 0)
            fprintf(stderr, "pptrain: warning: %s\n", ckpt_note(s->source));
        const ModelConfig *m = ckpt_model(s->source);
        if (run_options_given(ro, "--model") && !same_model(&ro->rc.model, m)) {
            error_set(err, "--model %s differs from %s/config.json (leave --model out with --init-from)",
                      ro->rc.model.name, ro->init_from);
            return -1;
        }
        ro->rc.model = *m;
        return run_config_validate(&ro->rc, err);
    }
    return 0;
}

// --tokenizer auto: the --init-from folder's tokenizer.json. Then, when --data or --val-data
// is a folder that `pptrain tokenize` wrote, its shards must come from the tokenizer that reads
// or judges them: --tokenizer's, else the model's own (the tokenizer.json of the --init-from
// folder or of the resumed checkpoint, which keeps its source's), when it has one.
static int resolve_tokenizer(RunSession *s, Error *err) {
    RunOptions *ro = &s->ro;
    char *tp = ro->rc.tokenizer_path;
    if (strcmp(tp, "auto") == 0) {
        if (!ro->init_from[0]) {
            error_set(err, "--tokenizer auto takes the --init-from folder's tokenizer.json; there is no --init-from");
            return -1;
        }
        char path[4200];
        snprintf(path, sizeof path, "%s/tokenizer.json", ro->init_from);
        if (access(path, R_OK) != 0) {
            error_set(err, "--tokenizer auto: %s: %s", path, strerror(errno));
            return -1;
        }
        if (strlen(path) >= sizeof ro->rc.tokenizer_path) {
            error_set(err, "--tokenizer auto: the path %s is too long", path);
            return -1;
        }
        memcpy(tp, path, strlen(path) + 1);
    }
    char model_tokenizer[sizeof s->source_dir + 16];
    snprintf(model_tokenizer, sizeof model_tokenizer, "%s/tokenizer.json", s->source_dir);
    const char *judge = tp[0] ? tp : s->source_dir[0] && access(model_tokenizer, R_OK) == 0 ? model_tokenizer : NULL;
    if (!judge) return 0;
    return token_manifest_check(ro->rc.data_path, judge, err) ||
                   (ro->rc.val_data_path[0] && token_manifest_check(ro->rc.val_data_path, judge, err))
               ? -1
               : 0;
}

int run_session_prepare(RunSession *s, Error *err) {
    if (s->source) return 0;
    return prepare_source(s, err) || resolve_tokenizer(s, err) ? -1 : 0;
}

// Every process: the pipeline's tensors from the source folder.
static int session_restore(void *ctx, Pipeline *p, TrainPosition *pos, Error *err) {
    RunSession *s = ctx;
    const CkptState *st = ckpt_state(s->source);
    const bool resume = s->ro.resume[0] != '\0';
    if (pipeline_load(p, ckpt_tensor_source, s->source, resume, resume ? st->adam_step : 0, err)) return -1;
    if (resume) {
        pos->step = st->step;
        pos->cursor = st->cursor;
    }
    return 0;
}

// ---- checkpoints --------------------------------------------------------------------------------

// The root records the manifest (storage/checkpoint_ranks.h wrote it): every file,
// trainer_state.json last, then 'complete'. Only the hashing of trainer_state.json can fail
// the checkpoint: a store that cannot take the manifest fails the recorder instead (the
// checkpoint on disk stands, and the session stops the run).
static int record_manifest(RunSession *s, int64_t id, const char *dir, const CkptState *st, int64_t *bytes, Error *err) {
    RunRecorder *r = &s->recorder;
    CkptFile state;
    if (ckpt_ranks_state_record(dir, st, &state, bytes, err)) return -1;
    if (id <= 0) return 0;
    for (int i = 0; i < st->n_files; i++) {
        const CkptFile *f = &st->files[i];
        if (recorder_checkpoint_file(r, id, f->path, f->bytes, f->sha256, f->stage)) return 0;
    }
    if (recorder_checkpoint_file(r, id, state.path, state.bytes, state.sha256, -1) == 0)
        recorder_checkpoint_complete(r, id);
    return 0;
}

// A checkpoint on disk whose row the store did not take: the newest 8 are kept for the journal.
static void keep_unrecorded(RunSession *s, const char *dir) {
    const int cap = (int)(sizeof s->unrecorded / sizeof s->unrecorded[0]);
    if (s->n_unrecorded == cap) {
        memmove(s->unrecorded[0], s->unrecorded[1], sizeof s->unrecorded[0] * (size_t)(cap - 1));
        s->n_unrecorded--;
    }
    snprintf(s->unrecorded[s->n_unrecorded++], sizeof s->unrecorded[0], "%s", dir);
}

// The root, once the checkpoint is whole on disk: its rows, and the view's note.
static int root_after_save(RunSession *s, int64_t id, const char *dir, const CkptState *st, int step, Error *err) {
    int64_t bytes = 0;
    if (record_manifest(s, id, dir, st, &bytes, err)) return -1;
    if (s->recorder.run > 0 && (id <= 0 || s->recorder.write_failed)) keep_unrecorded(s, dir);
    s->last_ckpt_id = id > 0 && !s->recorder.write_failed ? id : 0;
    snprintf(s->last_ckpt_dir, sizeof s->last_ckpt_dir, "%s", dir);
    if (s->on_checkpoint) s->on_checkpoint(s->view.ctx, dir, step, bytes, st->n_files + 1);
    return 0;
}

// Every process: the checkpoint across ranks (storage/checkpoint_ranks.h), in the folder the
// run's row and tag name; the root records it. The store's row comes first ('writing'): a
// checkpoint the store cannot record is still written, and a failed one is marked so.
static int session_save(void *ctx, Pipeline *p, const TrainPosition *pos, Error *err) {
    RunSession *s = ctx;
    char dir[4096];
    int64_t run = 0;
    if (ckpt_ranks_folder(p, s->ro.ckpt_dir, s->recorder.run, s->run_tag, pos->step, dir, sizeof dir, &run) >=
        (int)sizeof dir) {
        error_set(err, "--ckpt-dir: '%.40s...' is too long", s->ro.ckpt_dir);
        return -1;
    }
    const bool root = pipeline_is_root(p);
    const int64_t id = root ? recorder_checkpoint_begin(&s->recorder, pos->step, dir) : -1;
    const CkptRanksSave req = {.dir = dir, .rc = &s->ro.rc, .po = &s->ro.pipe, .pos = pos, .run_id = run,
                               .identity_src = s->source_dir};
    CkptState st;
    int rc = ckpt_ranks_save(p, &req, &st, err);
    if (rc == 0 && root) rc = root_after_save(s, id, dir, &st, pos->step, err);
    ckpt_state_clear(&st);
    if (rc) recorder_checkpoint_fail(&s->recorder, id, err->msg);
    return rc ? -1 : 0;
}

// Before step 1: what killed or failed checkpoints left behind (storage/checkpoint_cleanup.h).
static void clean_old_checkpoints(RunSession *s) {
    int n = 0;
    Error err;
    if (s->recorder.db && ckpt_clean_abandoned(s->recorder.db, s->ro.ckpt_dir, &n, &err))
        fprintf(stderr, "pptrain: warning: %s; unfinished checkpoints stay as they are\n", err.msg);
    if (s->ro.ckpt_dir[0]) ckpt_clean_incomplete(s->ro.ckpt_dir);
}

// ---- before step 1: every output path, and the memory the run needs -------------------------

// Can this process create a file in the folder dir? Creates and removes a probe (permission
// bits say nothing for root, nor for a read-only mount).
static int probe_folder(const char *flag, const char *given, const char *dir, Error *err) {
    char probe[PATH_MAX + 32];
    snprintf(probe, sizeof probe, "%s/.pptrain-probe-XXXXXX", dir);
    const int fd = mkstemp(probe);
    if (fd < 0) {
        error_set(err, "%s %s: cannot write in %s: %s", flag, given, dir, strerror(errno));
        return -1;
    }
    close(fd);
    unlink(probe);
    return 0;
}

// dir, or the nearest part of it that exists (the rest is created as the run writes), must be
// a folder this process can write in.
static int check_output_folder(const char *flag, const char *dir, Error *err) {
    char part[PATH_MAX];
    snprintf(part, sizeof part, "%s", dir);
    struct stat st;
    while (stat(part, &st) != 0) {
        if (errno != ENOENT && errno != ENOTDIR) {
            error_set(err, "%s %s: %s", flag, dir, strerror(errno));
            return -1;
        }
        char *slash = strrchr(part, '/');
        if (!slash) snprintf(part, sizeof part, ".");
        else if (slash == part) part[1] = '\0';
        else *slash = '\0';
    }
    if (!S_ISDIR(st.st_mode)) {
        error_set(err, "%s %s: %s is not a folder", flag, dir, part);
        return -1;
    }
    return probe_folder(flag, dir, part, err);
}

// A file the run will write: an existing one must be a file this process can open for
// writing (left as it is), and in every case its folder must take a new file: the trace is
// written to a temporary name there and renamed over the file, and SQLite keeps its -wal and
// -shm files beside the store.
static int check_output_file(const char *flag, const char *path, const char *example, Error *err) {
    struct stat st;
    if (stat(path, &st) == 0) {
        if (S_ISDIR(st.st_mode)) {
            error_set(err, "%s %s: a folder, not a file (name the file, e.g. %s/%s)", flag, path, path, example);
            return -1;
        }
        const int fd = open(path, O_WRONLY | O_CLOEXEC);
        if (fd < 0) {
            error_set(err, "%s %s: cannot write it: %s", flag, path, strerror(errno));
            return -1;
        }
        close(fd);
    }
    char dir[PATH_MAX];
    snprintf(dir, sizeof dir, "%s", path);
    char *slash = strrchr(dir, '/');
    if (!slash) snprintf(dir, sizeof dir, ".");
    else if (slash == dir) dir[1] = '\0';
    else *slash = '\0';
    if (stat(dir, &st) != 0) {
        error_set(err, "%s %s: no folder %s (%s)", flag, path, dir, strerror(errno));
        return -1;
    }
    if (!S_ISDIR(st.st_mode)) {
        error_set(err, "%s %s: %s is not a folder", flag, path, dir);
        return -1;
    }
    return probe_folder(flag, path, dir, err);
}

// --ckpt-dir made absolute: the store records each checkpoint's folder, and --resume, export
// and history must find it from any working directory.
static int absolute_ckpt_dir(RunOptions *ro, Error *err) {
    const char *rel = ro->ckpt_dir;
    if (!rel[0] || rel[0] == '/') return 0;
    while (rel[0] == '.' && rel[1] == '/') rel += 2;
    char cwd[PATH_MAX], abs[sizeof ro->ckpt_dir];
    if (!getcwd(cwd, sizeof cwd)) {
        error_set(err, "--ckpt-dir %s: cannot name the working directory (%s)", ro->ckpt_dir, strerror(errno));
        return -1;
    }
    if (snprintf(abs, sizeof abs, "%s/%s", cwd, rel) >= (int)sizeof abs) {
        error_set(err, "--ckpt-dir: '%.40s...' is too long", ro->ckpt_dir);
        return -1;
    }
    memcpy(ro->ckpt_dir, abs, sizeof abs);
    return 0;
}

// Every path the run writes, checked before anything is allocated or recorded, so that a
// typo costs a second rather than the whole run.
static int check_output_paths(const RunOptions *ro, Error *err) {
    if (ro->ckpt_dir[0] && check_output_folder("--ckpt-dir", ro->ckpt_dir, err)) return -1;
    if (ro->trace_path[0] && check_output_file("--trace", ro->trace_path, "trace.json", err)) return -1;
    if (ro->db_path[0] && check_output_file("--db", ro->db_path, "pptrain.db", err)) return -1;
    return 0;
}

// Memory this process may take: MemAvailable, else the free physical pages.
static double host_memory_available(void) {
    FILE *f = fopen("/proc/meminfo", "r");
    char line[256];
    double kib = -1.0;
    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, "MemAvailable: %lf kB", &kib) == 1) break;
    if (f) fclose(f);
    if (kib >= 0.0) return kib * 1024.0;
    return (double)sysconf(_SC_AVPHYS_PAGES) * (double)sysconf(_SC_PAGESIZE);
}

// Refuses, before the multi-gigabyte allocation that would fail (or swap the host to a halt),
// a run whose rough lower bound of host memory exceeds what the host has available. GPU
// stages keep their state on the device: not checked here.
static int check_memory(const RunConfig *rc, const PipelineOptions *po, Error *err) {
    if (po->device == DEVICE_CUDA) return 0;
    const bool local = !transport_multi_process(po->transport);
    const int ranks = po->ranks > 0 ? po->ranks : 1, dp = po->dp > 0 ? po->dp : 1;
    const double in_flight =
        schedule_peak_in_flight(po->schedule, ranks, rc->microbatches, po->virtual_stages, local);
    const double need = run_config_memory_bytes(rc, local ? 1.0 : 1.0 / ranks, local ? dp : 1, in_flight,
                                                po->recompute);
    const double have = host_memory_available();
    if (have <= 0.0 || need <= have) return 0;
    error_set(err, "this run needs at least %.1f GiB of memory (weights, gradients, AdamW moments and activations%s); "
                   "this machine has %.1f GiB available: use a smaller --batch, --seq or model, more --microbatches, "
                   "or --recompute all", need / 1073741824.0, local ? "" : " of one rank", have / 1073741824.0);
    return -1;
}

// ---- the session's hooks: its own work first (record), then the view's ----------------------------

static int session_on_start(void *ctx, const RunConfig *rc, const PipelineOptions *po, const RunInfo *info,
                            Error *err) {
    RunSession *s = ctx;
    s->recorder.resumed_from = s->resumed_from;
    if (recorder_begin(&s->recorder, rc, po, info, err)) return -1;
    clean_old_checkpoints(s);
    return s->view.on_start ? s->view.on_start(s->view.ctx, rc, po, info, err) : 0;
}

static void session_on_step(void *ctx, const Pipeline *p, const PipelineReport *r) {
    RunSession *s = ctx;
    recorder_step(&s->recorder, r);
    if (s->view.on_step) s->view.on_step(s->view.ctx, p, r);
}

static void session_on_eval(void *ctx, int step, double val_loss) {
    RunSession *s = ctx;
    recorder_eval(&s->recorder, step, val_loss, s->ro.rc.val_batches > 0 ? s->ro.rc.val_batches : 1);
    if (s->view.on_eval) s->view.on_eval(s->view.ctx, step, val_loss);
}

static void session_on_sample(void *ctx, int step, const int32_t *ids, int n, const char *text, double seconds) {
    RunSession *s = ctx;
    recorder_sample(&s->recorder, step, n, text, seconds);
    if (s->view.on_sample) s->view.on_sample(s->view.ctx, step, ids, n, text, seconds);
}

static bool session_should_stop(void *ctx) {
    RunSession *s = ctx;
    if (s->recorder.write_failed) return true;   // the store cannot be written: stop, after a checkpoint
    return s->view.should_stop && s->view.should_stop(s->view.ctx);
}

static void session_on_end(void *ctx, const RunSummary *sum) {
    RunSession *s = ctx;
    if (s->view.on_end) s->view.on_end(s->view.ctx, sum);
}

// The one line of a run stopped because its store could not be written: why, where the run
// stopped, and where its last checkpoint is (written, but not in the store).
static void store_failure_line(const RunSession *s, const RunSummary *sum, Error *err) {
    const int step = s->start_step + sum->steps;
    if (s->last_ckpt_dir[0])
        error_set(err, "%s; the run stopped at step %d, its last checkpoint is %s", s->recorder.failure.msg, step, s->last_ckpt_dir);
    else error_set(err, "%s; the run stopped at step %d", s->recorder.failure.msg, step);
}

// The store stayed locked past the patience: the run's end and the checkpoints it has no row
// for go into a journal beside it, which the next writer records (storage/db_journal.h), so
// the row says what happened and --resume latest finds the checkpoint the exit line named.
static void keep_in_journal(RunSession *s, const char *status, const char *line) {
    const char *dirs[8];
    for (int i = 0; i < s->n_unrecorded; i++) dirs[i] = s->unrecorded[i];
    Error jerr;
    if (db_journal_write(s->recorder.path, s->recorder.run, status, line, dirs, s->n_unrecorded, &jerr))
        fprintf(stderr, "pptrain: warning: %s; the store's row of run %lld stays as it is\n", jerr.msg,
                (long long)s->recorder.run);
}

void run_session_release(RunSession *s) {
    ckpt_close(s->source);
    s->source = NULL;
}

int run_session(RunSession *s, RunSummary *summary, Error *err) {
    RunSummary local;
    RunSummary *sum = summary ? summary : &local;
    memset(sum, 0, sizeof *sum);
    if (run_session_prepare(s, err) || check_output_paths(&s->ro, err) || absolute_ckpt_dir(&s->ro, err) ||
        check_memory(&s->ro.rc, &s->ro.pipe, err))
        return -1;
    snprintf(s->recorder.path, sizeof s->recorder.path, "%s", s->ro.db_path);
    // The tag of the run's checkpoint folder: only the root's counts (checkpoint_folder).
    // Test hook: PPTRAIN_TEST_RUN_TAG=HEX names it, for a test that must know a folder before
    // the run writes it.
    const char *tag = getenv("PPTRAIN_TEST_RUN_TAG");
    if (tag && tag[0]) s->run_tag = (uint32_t)strtoul(tag, NULL, 16);
    else if (getrandom(&s->run_tag, sizeof s->run_tag, 0) != (ssize_t)sizeof s->run_tag)
        s->run_tag = (uint32_t)getpid() ^ (uint32_t)time(NULL);
    const TrainHooks hooks = {.ctx = s, .on_start = session_on_start, .on_step = session_on_step,
                              .on_eval = session_on_eval, .on_sample = session_on_sample,
                              .should_stop = session_should_stop,
                              .on_end = session_on_end};
    const CheckpointHooks ckpt = {.ctx = s, .restore = s->source ? session_restore : NULL,
                                  .save = s->ro.ckpt_dir[0] ? session_save : NULL, .every = s->ro.rc.ckpt_every};
    int result = train_run(&s->ro.rc, &s->ro.pipe, &hooks, &ckpt, sum, err);
    if (result == 0 && s->recorder.write_failed) {   // stopped because the store failed
        result = -1;
        store_failure_line(s, sum, err);
    }
    Error end_err;
    const char *status = result ? "failed" : sum->stopped ? "stopped" : "finished";
    if (recorder_end(&s->recorder, status, result ? err->msg : NULL, &end_err) && result == 0) {
        result = -1;   // trained, but the store holds neither its last steps nor its end
        *err = end_err;
    }
    if (s->recorder.locked_out && s->recorder.run > 0) keep_in_journal(s, status, result ? err->msg : NULL);
    run_session_release(s);
    return result;
}
