// pipeline_eval, the validation loss: forward only on the training layout's ranks and stages.
// Under the layouts below (every built-in schedule, replicas, recompute), the loss
// of a batch is the bits of the loss a training step reports for that batch before its update,
// on one stage with the same replicas and microbatches; and an evaluation leaves the weights,
// and so the next step, untouched.
#include <stdlib.h>
#include <string.h>

#include "engine/pipeline.h"
#include "parity_util.h"
#include "test_util.h"

static Pipeline *create(const ParityLayout *l, Error *err) {
    const PipelineOptions o = parity_layout_options(l);
    RunConfig rc = parity_run(l->M * l->D);
    rc.microbatches = l->M;
    return pipeline_create(&rc, &o, err);
}

static void check_layout(const ParityLayout *l) {
    char what[160];
    parity_layout_name(what, sizeof what, "eval", l);
    parity_watch(what);
    const ParityLayout one = {"gpipe", 1, 1, l->D, l->M, false};
    Error err = {{0}};
    Pipeline *ref = create(&one, &err), *p = create(l, &err);
    CHECK(ref && p, "%s: %s", what, err.msg);
    if (!ref || !p) {
        pipeline_free(ref);
        pipeline_free(p);
        parity_unwatch();
        return;
    }
    const int rows = PARITY_ROWS * l->M * l->D;
    int32_t *in = malloc(sizeof(int32_t) * (size_t)rows * PARITY_T), *tg = malloc(sizeof(int32_t) * (size_t)rows * PARITY_T);
    parity_batch(0, rows, 259, in, tg);
    double got = 0, again = 0;
    CHECK(pipeline_eval(p, in, tg, &got, &err) == 0, "%s: %s", what, err.msg);
    CHECK(pipeline_eval(p, in, tg, &again, &err) == 0 && again == got, "%s: a second evaluation %.17g vs %.17g",
          what, again, got);
    // One stage's training step on that batch reports the same loss (before its update).
    PipelineReport r;
    CHECK(pipeline_step(ref, in, tg, 0, &r, &err) == 0 && r.step.loss == got,
          "%s: evaluated %.17g vs one stage's step %.17g", what, got, r.step.loss);
    // The evaluation changed nothing: the pipeline's step on that batch is the one stage's,
    // loss and every weight to the bit.
    PipelineReport q;
    CHECK(pipeline_step(p, in, tg, 0, &q, &err) == 0 && q.step.loss == r.step.loss, "%s: step after eval %.17g vs %.17g",
          what, q.step.loss, r.step.loss);
    const StageModel *model = pipeline_stage(ref, 0);
    for (int i = 0; i < model->n_params; i++) {
        const ParamInfo *pi = &model->params[i], *info = NULL;
        const float *w = pipeline_weights(p, pi->name, &info);
        CHECK(w && parity_same_bits(w, model->weights + pi->offset, pi->numel), "%s: %s differs after a step", what,
              pi->name);
    }
    free(in);
    free(tg);
    pipeline_free(ref);
    pipeline_free(p);
    parity_unwatch();
}

int main(void) {
    const ParityLayout layouts[] = {
        {"gpipe", 2, 1, 1, 4, false},          {"1f1b", 4, 1, 1, 4, false},          {"zb-h1", 2, 1, 2, 4, false},
        {"zb-v", 2, 2, 1, 4, false},           {"interleaved-1f1b", 2, 2, 2, 4, false}, {"looped-bfs", 3, 2, 1, 3, false},
        {"1f1b", 3, 1, 2, 6, true},
    };
    for (size_t i = 0; i < sizeof layouts / sizeof layouts[0]; i++) check_layout(&layouts[i]);
    return test_finish();
}
