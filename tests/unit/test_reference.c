// pptrain against PyTorch: tests/fixtures/tiny_reference.safetensors holds what Hugging Face
// LlamaForCausalLM computes in float64 for the `tiny` preset with pptrain's initial weights
// (tests/reference/make_fixture.py). This test holds pptrain's fp32 CPU path to it:
//   initial weights   bitwise (first 16 values of every tensor)
//   logits            ||a - b|| / ||b|| <= 1e-5
//   loss              |a - b| / b       <= 1e-6
//   every gradient    ||a - b|| / ||b|| <= 1e-5
//   10 AdamW steps    each loss          <= 1e-5 relative (warmup, cosine decay, clipping),
//                     and the weights after them within 10 times PyTorch fp32's distance
//                     from float64 (check_weights_after_training)
// and checks that splitting the batch into microbatches leaves the loss and gradients as
// they were (the batch loss is the mean over all its non-pad tokens, not a mean of means).
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "engine/reference_step.h"
#include "storage/safetensors.h"
#include "kernels/cpu/kernels.h"
#include "test_util.h"

#define FIXTURE PPTRAIN_SOURCE_DIR "/tests/fixtures/tiny_reference.safetensors"
enum { B = 4, T = 32, STEPS = 10, SEED = 1337 };

// The fixture tensor as float32 (it must exist with numel values).
static float *fixture_f32(const SafetensorsFile *f, const char *name, size_t numel) {
    const SafetensorsTensor *t = safetensors_find(f, name);
    CHECK(t != NULL, "fixture has no tensor %s", name);
    if (!t) return NULL;
    CHECK(t->numel == numel, "%s: %zu values, expected %zu", name, t->numel, numel);
    float *out = malloc(t->numel * sizeof(float));
    Error err;
    if (safetensors_to_f32(t, out, t->numel, &err)) {
        CHECK(0, "%s", err.msg);
        free(out);
        return NULL;
    }
    return out;
}

static const int32_t *fixture_i32(const SafetensorsFile *f, const char *name, size_t numel) {
    const SafetensorsTensor *t = safetensors_find(f, name);
    CHECK(t && t->dtype == ST_I32 && t->numel == numel, "fixture tensor %s: I32 x %zu", name, numel);
    return t && t->dtype == ST_I32 && t->numel == numel ? t->data : NULL;
}

static double fixture_f64_at(const SafetensorsFile *f, const char *name, int i) {
    const SafetensorsTensor *t = safetensors_find(f, name);
    if (!t || t->dtype != ST_F64 || (size_t)i >= t->numel) {
        CHECK(0, "fixture tensor %s[%d] (F64) missing", name, i);
        return NAN;
    }
    double v;
    memcpy(&v, (const char *)t->data + (size_t)i * 8, 8);
    return v;
}

static RunConfig reference_run_config(const SafetensorsFile *f, int microbatches) {
    RunConfig rc = run_config_defaults();
    Error err;
    model_config_preset(&rc.model, "tiny", &err);
    rc.batch = B;
    rc.seq_len = T;
    rc.microbatches = microbatches;
    rc.steps = STEPS;
    rc.seed = SEED;
    rc.optim = optim_defaults();   // betas 0.9/0.99, eps 1e-8, weight decay 0.1
    rc.optim.lr = 1e-2;
    rc.optim.min_lr = 1e-3;
    rc.optim.warmup_steps = 3;
    rc.optim.total_steps = STEPS;
    const char *clip = safetensors_metadata(f, "clip");
    CHECK(clip != NULL, "fixture metadata has no 'clip'");
    rc.optim.grad_clip = clip ? strtod(clip, NULL) : 1.0;
    return rc;
}

static void check_init(const SafetensorsFile *f, const StageModel *sm) {
    int exact = 0;
    for (int i = 0; i < sm->n_params; i++) {
        char name[160];
        snprintf(name, sizeof name, "init_head.%s", sm->params[i].name);
        float *ref = fixture_f32(f, name, 16);
        if (!ref) continue;
        exact += memcmp(ref, sm->weights + sm->params[i].offset, 16 * sizeof(float)) == 0;
        free(ref);
    }
    CHECK(exact == sm->n_params, "initial weights equal PyTorch's bitwise for %d of %d tensors",
          exact, sm->n_params);
}

// Forward + backward of the fixture batch as `microbatches` slices; compares loss and grads.
static void check_batch(const SafetensorsFile *f, int microbatches) {
    RunConfig rc = reference_run_config(f, microbatches);
    Error err;
    StageModel *sm = stage_create(&rc.model, 0, rc.model.layers, true, true, SEED, &err);
    const int rows = B / microbatches;
    StageActs *acts = stage_acts_create(sm, rows, T);
    stage_acts_keep_logits(acts, true);
    const int32_t *inputs = fixture_i32(f, "input_ids", B * T);
    const int32_t *targets = fixture_i32(f, "targets", B * T);
    const size_t V = (size_t)rc.model.vocab;
    float *ref_logits = fixture_f32(f, "logits", (size_t)B * T * V);
    if (!inputs || !targets || !ref_logits) return;
    if (microbatches == 1) check_init(f, sm);

    int n_targets = 0;
    for (int i = 0; i < B * T; i++) n_targets += targets[i] >= 0;
    double loss = 0.0, worst_logits = 0.0;
    for (int m = 0; m < microbatches; m++) {
        const size_t off = (size_t)m * rows * T;
        loss += stage_forward(sm, acts, inputs + off, NULL, targets + off, 1.0f / n_targets);
        const double d = rel_norm_diff(stage_acts_logits(acts), ref_logits + off * V, (size_t)rows * T * V);
        if (d > worst_logits) worst_logits = d;
        stage_backward(sm, acts, NULL);
    }
    const double ref_loss = fixture_f64_at(f, "loss", 0);
    printf("M=%d: loss %.9f (torch %.9f), rel diff %.2e; logits rel diff %.2e\n", microbatches,
           loss, ref_loss, fabs(loss - ref_loss) / ref_loss, worst_logits);
    // Bounds, from fp32's unit roundoff u = 6e-8: every value passes about 8 layers x 6 ops
    // (GEMMs over K <= 128, each a relative error of order sqrt(K) u for random-signed terms,
    // K u at worst), so the logits carry ~1e2 u = 6e-6 at worst: 1e-5 (measured worst, every
    // OpenBLAS kernel family: 4.1e-7). The loss averages ~100 per-token terms computed in
    // double from those logits, whose errors partly cancel: 1e-6 (measured 5.2e-9).
    CHECK(worst_logits <= 1e-5, "logits rel diff %.3g", worst_logits);
    CHECK(fabs(loss - ref_loss) / ref_loss <= 1e-6, "loss %.9g vs %.9g", loss, ref_loss);

    double worst = 0.0;
    const char *worst_name = "";
    for (int i = 0; i < sm->n_params; i++) {
        const ParamInfo *p = &sm->params[i];
        char name[160];
        snprintf(name, sizeof name, "grad.%s", p->name);
        float *ref = fixture_f32(f, name, p->numel);
        if (!ref) continue;
        // The backward doubles the forward's chain of ops: 1e-5 as for the logits (measured
        // worst over the kernel families: 8.5e-7).
        const double d = rel_norm_diff(sm->grads + p->offset, ref, p->numel);
        CHECK(d <= 1e-5, "gradient of %s: rel diff %.3g", p->name, d);
        if (d > worst) {
            worst = d;
            worst_name = p->name;
        }
        free(ref);
    }
    printf("M=%d: %d gradients, worst rel diff %.2e (%s)\n", microbatches, sm->n_params, worst, worst_name);
    free(ref_logits);
    stage_acts_free(acts);
    stage_free(sm);
}

// 10 steps on one device with `microbatches` slices of the fixture's batches; the losses and
// norms are held to torch's as they go; the model is returned.
static StageModel *train_reference(const SafetensorsFile *f, int microbatches, bool report) {
    RunConfig rc = reference_run_config(f, microbatches);
    Error err;
    StageModel *sm = stage_create(&rc.model, 0, rc.model.layers, true, true, SEED, &err);
    StageActs *acts = stage_acts_create(sm, B / microbatches, T);
    AdamWState opt = adamw_state_create(sm->numel);
    const int32_t *inputs = fixture_i32(f, "train_inputs", STEPS * B * T);
    const int32_t *targets = fixture_i32(f, "train_targets", STEPS * B * T);
    double worst = 0.0;
    for (int s = 0; inputs && targets && s < STEPS; s++) {
        const StepReport r = reference_step(sm, acts, &opt, &rc, 1, inputs + (size_t)s * B * T,
                                          targets + (size_t)s * B * T, s);
        const double ref_loss = fixture_f64_at(f, "train_losses", s);
        const double ref_lr = fixture_f64_at(f, "train_lrs", s);
        const double ref_norm = fixture_f64_at(f, "train_grad_norms", s);
        const double d = fabs(r.loss - ref_loss) / ref_loss;
        if (d > worst) worst = d;
        if (report)
            printf("step %2d: loss %.8f torch %.8f (rel %.1e) | norm %.6f torch %.6f | lr %.6g torch %.6g\n",
                   s, r.loss, ref_loss, d, r.grad_norm, ref_norm, r.lr, ref_lr);
        CHECK(d <= 1e-5, "M=%d step %d loss rel diff %.3g", microbatches, s, d);
        CHECK(fabs(r.lr - ref_lr) <= 1e-12 * ref_lr, "step %d lr %.10g vs %.10g", s, r.lr, ref_lr);
        CHECK(fabs(r.grad_norm - ref_norm) <= 1e-5 * ref_norm, "step %d grad norm %.8g vs %.8g", s,
              r.grad_norm, ref_norm);
    }
    if (report) printf("10 AdamW steps: worst loss rel diff %.2e\n", worst);
    adamw_state_free(&opt);
    stage_acts_free(acts);
    return sm;
}

// The weights after 10 AdamW steps, the first 16 values of every tensor. Adam divides by
// sqrt(v), so an entry whose gradients are small next to their rounding error moves by up to
// lr per step whatever its gradient's exact value: no useful fixed bound on fp32-vs-float64
// weights follows from the arithmetic. The yardstick is an independent fp32 implementation of
// the same training: the fixture also holds stock float32 PyTorch's weights after the same 10
// steps (final_head_fp32.*). pptrain may land at most 10 times further from float64 than
// PyTorch's own fp32 run lands, comparing the worst tensor of each.
static void check_weights_after_training(const SafetensorsFile *f) {
    StageModel *sm = train_reference(f, 1, true);
    double worst = 0.0, worst_torch32 = 0.0;
    for (int i = 0; i < sm->n_params; i++) {
        char name[160], name32[176];
        snprintf(name, sizeof name, "final_head.%s", sm->params[i].name);
        snprintf(name32, sizeof name32, "final_head_fp32.%s", sm->params[i].name);
        float *ref = fixture_f32(f, name, 16), *torch32 = fixture_f32(f, name32, 16);
        if (ref && torch32) {
            const double d = rel_norm_diff(sm->weights + sm->params[i].offset, ref, 16);
            const double d32 = rel_norm_diff(torch32, ref, 16);
            if (d > worst) worst = d;
            if (d32 > worst_torch32) worst_torch32 = d32;
        }
        free(ref);
        free(torch32);
    }
    printf("weights after 10 steps: worst rel diff %.2e from float64 (PyTorch fp32: %.2e; bound 10x that)\n", worst,
           worst_torch32);
    CHECK(worst <= 10.0 * worst_torch32, "weights after 10 steps: rel diff %.3g > 10 x PyTorch fp32's %.3g", worst,
          worst_torch32);
    stage_free(sm);
}

int main(void) {
    Error err;
    SafetensorsFile *f = safetensors_open(FIXTURE, &err);
    CHECK(f != NULL, "%s", err.msg);
    if (!f) return test_finish();
    check_batch(f, 1);
    check_batch(f, 2);
    check_batch(f, 4);
    check_weights_after_training(f);
    safetensors_close(f);
    return test_finish();
}
