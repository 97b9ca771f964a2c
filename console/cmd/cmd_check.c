// `pptrain check [run options]`: one batch pipelined and on a single device from the same
// weights; prints the relative difference of the loss and the largest relative difference
// over every parameter gradient, and exits 1 above tolerance (DESIGN.md, "Parity").
// Each process compares the stages it hosts against a single-device model it builds itself
// (weights depend only on (seed, name), or are read from the --init-from folder or the
// --resume checkpoint), so the check works unchanged under MPI.
// On GPUs (--device cuda) the pipelined run is on the GPUs and the single device is this CPU.
#include "console/cmd/cmd_check.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "console/cli.h"
#include "console/cli_options.h"
#include "kernels/cpu/kernels.h"
#include "console/run_options.h"
#include "console/run_session.h"
#include "engine/reference_step.h"
#include "storage/checkpoint.h"

typedef struct {
    double loss_pipe, loss_ref, loss_rel_diff;
    double max_grad_rel_diff;
    char worst[96];          // the tensor with the largest difference (on this process)
    int tensors;             // compared on this process
    bool bitwise;            // the loss and every gradient are the same bits (on every process)
} CheckResult;

// Every parameter of the stages this process hosts against the single-device gradients.
static void compare_grads(const Pipeline *p, const StageModel *ref, CheckResult *res) {
    for (int s = 0; s < pipeline_n_stages(p); s++) {
        if (!pipeline_hosts_stage(p, s)) continue;
        const StageModel *sm = pipeline_stage(p, s);
        for (int i = 0; i < sm->n_params; i++) {
            const ParamInfo *pi = &sm->params[i], *ri = stage_find_param(ref, pi->name);
            const double d = rel_norm_diff(sm->grads + pi->offset, ref->grads + ri->offset, pi->numel);
            if (memcmp(sm->grads + pi->offset, ref->grads + ri->offset, pi->numel * sizeof(float)) != 0)
                res->bitwise = false;
            res->tensors++;
            if (d > res->max_grad_rel_diff || res->tensors == 1) {
                res->max_grad_rel_diff = d;
                snprintf(res->worst, sizeof res->worst, "%s", pi->name);
            }
        }
    }
}

// The run's first batch, read as train reads it (--tokenizer and all: engine/train_loop.h).
static int first_batch(const RunConfig *rc, int32_t *inputs, int32_t *targets, Error *err) {
    TrainData d;
    if (train_data_open(rc, &d, err)) return -1;
    dataset_next_batch(d.ds, rc->batch, inputs, targets);
    const int32_t max_token = dataset_max_token(d.ds);
    train_data_close(&d);
    if (max_token >= rc->model.vocab) {
        error_set(err, "%s: token id %d is outside the model's vocabulary (%d)", rc->data_path, (int)max_token,
                  rc->model.vocab);
        return -1;
    }
    return 0;
}

// The single device's whole model: the source folder's weights, or (seed, name)'s.
static StageModel *reference_model(const RunConfig *rc, Checkpoint *source, Error *err) {
    if (source) return ckpt_load_model(source, err);
    return stage_create(&rc->model, 0, rc->model.layers, true, true, rc->seed, err);
}

static int run_check(const RunOptions *ro, Pipeline *p, Checkpoint *source, const int32_t *inputs,
                     const int32_t *targets, CheckResult *res, Error *err) {
    const RunConfig *rc = &ro->rc;
    if (source && pipeline_load(p, ckpt_tensor_source, source, false, 0, err)) return -1;
    if (pipeline_compute_grads(p, inputs, targets, &res->loss_pipe, err)) return -1;
    pipeline_sync_to_host(p, true);   // GPU stages: their gradients into the host arrays compared below
    StageModel *ref = reference_model(rc, source, err);
    if (!ref) return -1;
    // The single device splits the batch as the D replicas do (reference_forward_backward).
    StageActs *acts = stage_acts_create(ref, rc->batch / (ro->pipe.dp * rc->microbatches), rc->seq_len);
    res->loss_ref = reference_forward_backward(ref, acts, rc, ro->pipe.dp, inputs, targets);
    res->loss_rel_diff = fabs(res->loss_pipe - res->loss_ref) / fabs(res->loss_ref);
    res->bitwise = res->loss_pipe == res->loss_ref;
    compare_grads(p, ref, res);
    res->max_grad_rel_diff = pipeline_world_max(p, res->max_grad_rel_diff);
    res->bitwise = pipeline_world_max(p, res->bitwise ? 0.0 : 1.0) == 0.0;
    stage_acts_free(acts);
    stage_free(ref);
    return 0;
}

static void print_text(const RunOptions *ro, const Pipeline *p, const Checkpoint *source, const CheckResult *res,
                       double tol_loss, double tol_grad, bool ok) {
    printf("pptrain check: %s, %d stages on %d ranks x %d replicas, %d microbatches, batch %d x %d%s\n",
           ro->pipe.schedule, pipeline_n_stages(p), ro->pipe.ranks, ro->pipe.dp, ro->rc.microbatches,
           ro->rc.batch, ro->rc.seq_len,
           ro->pipe.device != DEVICE_CUDA ? "" : ro->pipe.gpu_fp32 ? ", on GPUs in fp32" : ", on GPUs in bf16");
    printf("  weights    %s\n", source ? ckpt_dir(source) : "initialized from --seed");
    printf("  loss       pipelined %.9f  single device %.9f  rel diff %.2e\n", res->loss_pipe, res->loss_ref,
           res->loss_rel_diff);
    printf("  gradients  max rel diff %.2e over every parameter (worst here: %s)\n", res->max_grad_rel_diff,
           res->worst);
    if (ok && res->bitwise)
        printf("  bitwise: the loss and every gradient are the same bits as on one device\n");
    else
        printf("  %s (tolerances: loss %.0e, gradients %.0e)\n", ok ? "ok" : "FAILED", tol_loss, tol_grad);
}

static void print_json(const CheckResult *res, bool ok) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "loss_rel_diff", res->loss_rel_diff);
    cJSON_AddNumberToObject(o, "max_grad_rel_diff", res->max_grad_rel_diff);
    cJSON_AddBoolToObject(o, "ok", ok);
    cJSON_AddBoolToObject(o, "bitwise", ok && res->bitwise);
    cJSON_AddNumberToObject(o, "loss_pipelined", res->loss_pipe);
    cJSON_AddNumberToObject(o, "loss_single_device", res->loss_ref);
    char *text = cJSON_PrintUnformatted(o);
    printf("%s\n", text);
    free(text);
    cJSON_Delete(o);
}

// check's own flags; the rest of argv are run options.
typedef struct {
    bool json;
    double tol_loss, tol_grad;   // -1: the defaults of check_body
} CheckFlags;

static int set_json(void *o, const char *f, const char *v, Error *e) {
    (void)f, (void)v, (void)e;
    ((CheckFlags *)o)->json = true;
    return 0;
}
static int set_tol_loss(void *o, const char *f, const char *v, Error *e) {
    return cli_parse_float(f, v, 0.0, 1.0, &((CheckFlags *)o)->tol_loss, e);
}
static int set_tol_grad(void *o, const char *f, const char *v, Error *e) {
    return cli_parse_float(f, v, 0.0, 1.0, &((CheckFlags *)o)->tol_grad, e);
}
static const CliOption CHECK_FLAGS[] = {
    {"--json", NULL, "print the result as one JSON object", set_json, 0},
    {"--tol-loss", "X", "largest relative loss difference that passes (CPU 1e-6, GPU 1e-5, bf16 1e-2)", set_tol_loss,
     0},
    {"--tol-grad", "X", "largest relative gradient difference that passes (CPU 1e-5, GPU 1e-4, bf16 5e-2)",
     set_tol_grad, 0},
};
#define N_CHECK_FLAGS ((int)(sizeof CHECK_FLAGS / sizeof CHECK_FLAGS[0]))

// Pulls check's own flags out of argv (so the rest parse as run options).
static int parse_check_flags(int *argc, char **argv, CheckFlags *f, Error *err) {
    int out = 2;
    for (int i = 2; i < *argc; i++) {
        const CliOption *opt = cli_option_find(CHECK_FLAGS, N_CHECK_FLAGS, argv[i]);
        if (opt) {
            if (cli_option_take(opt, *argc, argv, &i, f, err)) return -1;
        } else {
            argv[out++] = argv[i];
        }
    }
    *argc = out;
    return 0;
}

// The check itself, once the options and the source folder are resolved.
static int check_body(RunOptions *ro, Checkpoint *source, bool json, double tol_loss, double tol_grad, Error *err) {
    // On GPUs the check holds the pipeline to the CPU's single device in fp32 unless bf16 is
    // asked for; bf16 GEMMs and messages then get bf16-sized tolerances.
    const bool gpu = ro->pipe.device == DEVICE_CUDA;
    if (gpu && !run_options_given(ro, "--precision")) ro->pipe.gpu_fp32 = true;
    const bool bf16 = gpu && !ro->pipe.gpu_fp32;
    if (tol_loss < 0) tol_loss = bf16 ? 1e-2 : gpu ? 1e-5 : 1e-6;   // CPU: the test suite's parity tolerances
    if (tol_grad < 0) tol_grad = bf16 ? 5e-2 : gpu ? 1e-4 : 1e-5;
    const size_t n = (size_t)ro->rc.batch * ro->rc.seq_len;
    int32_t *inputs = xmalloc(n * sizeof(int32_t)), *targets = xmalloc(n * sizeof(int32_t));
    int result = first_batch(&ro->rc, inputs, targets, err);
    Pipeline *p = result ? NULL : pipeline_create(&ro->rc, &ro->pipe, err);
    CheckResult res = {0};
    if (!p || run_check(ro, p, source, inputs, targets, &res, err)) result = -1;
    const bool ok = result == 0 && res.loss_rel_diff <= tol_loss && res.max_grad_rel_diff <= tol_grad;
    if (result == 0 && pipeline_is_root(p)) {
        if (json) print_json(&res, ok);
        else print_text(ro, p, source, &res, tol_loss, tol_grad, ok);
    }
    pipeline_free(p);
    free(inputs);
    free(targets);
    if (result) return cli_fail(err);
    return ok ? 0 : 1;
}

// --init-from and --resume, resolved as a run resolves them (console/run_session.h): the
// model, and for --resume the run's data, batch and seed, come from the folder; its weights
// are loaded into both sides of the check. A finished run's checkpoint can be checked.
static int prepare_source(RunSession *s, Error *err) {
    s->weights_only = true;
    return run_session_prepare(s, err);
}

int cmd_check(int argc, char **argv) {
    static RunSession session;   // large (paths); one per process
    RunOptions *ro = &session.ro;
    *ro = run_options_defaults();
    Error err = {{0}};
    CheckFlags f = {.json = false, .tol_loss = -1, .tol_grad = -1};
    if (parse_check_flags(&argc, argv, &f, &err)) return cli_fail(&err);
    const int parsed = run_options_parse_check(argc, argv, 2, ro, &err);
    if (parsed == 1) {
        printf("usage: pptrain check [run options] [--json] [--tol-loss X] [--tol-grad X]\n\n");
        run_options_usage_check(stdout);
        printf("\ncheck options:\n");
        cli_options_usage(stdout, CHECK_FLAGS, N_CHECK_FLAGS, 36, NULL, NULL);
        return 0;
    }
    const int refused = parsed ? 0 : cli_refuse_mpirun_copies("check", &ro->pipe.transport);
    if (refused) return refused;
    if (parsed || prepare_source(&session, &err)) {
        run_session_release(&session);
        return cli_fail(&err);
    }
    int rc = check_body(ro, session.source, f.json, f.tol_loss, f.tol_grad, &err);
    run_session_release(&session);
    return rc;
}
