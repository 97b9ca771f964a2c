// Tied word embeddings across stages (Megatron's way, engine/model/model.h: head_copy_offset):
// the first stage holds the embedding, the last a copy as its head, and the copies' gradients
// are summed (E + H) before the step. Every layout trains the tiny model with tied embeddings
// 5 steps to the same bits as one stage does (--stages 1, the same replicas and microbatches),
// and the head copy stays the embedding, bit for bit.
#include <stdlib.h>
#include <string.h>

#include "engine/pipeline.h"
#include "parity_util.h"
#include "test_util.h"

static RunConfig tied_run(int M, int D) {
    RunConfig rc = parity_run(M * D);
    rc.microbatches = M;
    rc.model.tie_word_embeddings = true;
    return rc;
}

static Pipeline *create(const ParityLayout *l, Error *err) {
    const PipelineOptions o = parity_layout_options(l);
    const RunConfig rc = tied_run(l->M, l->D);
    return pipeline_create(&rc, &o, err);
}

// Trains PARITY_STEPS steps; the losses into loss[].
static int train(Pipeline *p, const ParityLayout *l, double *loss, Error *err) {
    const RunConfig rc = tied_run(l->M, l->D);
    int32_t *inputs = malloc(sizeof(int32_t) * (size_t)rc.batch * PARITY_T);
    int32_t *targets = malloc(sizeof(int32_t) * (size_t)rc.batch * PARITY_T);
    int rcode = 0;
    for (int step = 0; step < PARITY_STEPS && rcode == 0; step++) {
        parity_batch(step, rc.batch, rc.model.vocab, inputs, targets);
        PipelineReport r;
        rcode = pipeline_step(p, inputs, targets, step, &r, err);
        loss[step] = r.step.loss;
    }
    free(inputs);
    free(targets);
    return rcode;
}

// The last stage's head copy against the first stage's embedding.
static bool copy_is_embedding(const Pipeline *p) {
    const StageModel *last = pipeline_stage(p, pipeline_n_stages(p) - 1);
    const ParamInfo *info = NULL;
    const float *wte = pipeline_weights(p, "model.embed_tokens.weight", &info);
    return last && last->head_copy_offset && wte &&
           parity_same_bits(last->weights + last->head_copy_offset, wte, info->numel);
}

static void check_layout(const ParityLayout *l) {
    char what[160];
    parity_layout_name(what, sizeof what, "tied", l);
    parity_watch(what);
    const ParityLayout one = {"gpipe", 1, 1, l->D, l->M, false};
    Error err = {{0}};
    Pipeline *ref = create(&one, &err), *p = create(l, &err);
    CHECK(ref && p, "%s: %s", what, err.msg);
    double want[PARITY_STEPS], got[PARITY_STEPS];
    if (ref && p && train(ref, &one, want, &err) == 0 && train(p, l, got, &err) == 0) {
        for (int s = 0; s < PARITY_STEPS; s++)
            CHECK(got[s] == want[s], "%s step %d: loss %.17g vs one stage %.17g", what, s, got[s], want[s]);
        const StageModel *model = pipeline_stage(ref, 0);
        for (int i = 0; i < model->n_params; i++) {
            const ParamInfo *pi = &model->params[i], *info = NULL;
            const float *w = pipeline_weights(p, pi->name, &info);
            CHECK(w && parity_same_bits(w, model->weights + pi->offset, pi->numel), "%s: %s differs", what,
                  pi->name);
        }
        CHECK(copy_is_embedding(p) && copy_is_embedding(ref), "%s: the head copy is not the embedding", what);
    } else {
        CHECK(false, "%s: %s", what, err.msg);
    }
    pipeline_free(ref);
    pipeline_free(p);
    parity_unwatch();
}

int main(void) {
    const ParityLayout layouts[] = {
        {"1f1b", 2, 1, 1, 4, false},          {"gpipe", 4, 1, 1, 4, false},
        {"zb-h1", 2, 1, 2, 4, false},         {"zb-v", 2, 2, 1, 4, false},   // embedding and head on rank 0
        {"interleaved-1f1b", 2, 2, 2, 4, false}, {"looped-bfs", 3, 2, 1, 3, false},
        {"1f1b", 3, 1, 2, 6, true},
    };
    for (size_t i = 0; i < sizeof layouts / sizeof layouts[0]; i++) check_layout(&layouts[i]);
    parity_references_free();
    return test_finish();
}
