// console/cmd/plan_from_run_print: `pptrain plan --from-run RUN` printed: the measured run, its
// layout predicted, and the top layouts, as text or one JSON line (console/plan_from_run.h).
#include "console/cmd/plan_from_run_print.h"

#include <cjson/cJSON.h>
#include <stdio.h>

#include "console/cmd/history_format.h"

static void list_text(const int *v, int n, char *buf, size_t size) {
    size_t len = 0;
    buf[0] = '\0';
    for (int k = 0; k < n && len + 12 < size; k++)
        len += (size_t)snprintf(buf + len, size - len, "%s%d", k ? "," : "", v[k]);
}

static void print_text(const RunPlan *p, int top) {
    char split[256];
    list_text(p->split, p->S, split, sizeof split);
    printf("run %lld: %s, P %d, V %d, M %d, layers per stage %s; %d step%s measured (the first left out)\n", p->run,
           p->schedule, p->P, p->V, p->M, split, p->steps, p->steps == 1 ? "" : "s");
    printf("measured:  step %.3f ms, bubble %.1f %%, stage busy per step", p->step_ms, 100.0 * p->bubble);
    for (int k = 0; k < p->S; k++) printf("%s%.3f", k ? "," : " ", p->busy_ms[k]);
    printf(" ms\n");
    if (p->same_ok)
        printf("predicted: step %.3f ms, bubble %.1f %% (this layout at the measured stage times, messages free,\n"
               "           plus the %.3f ms the step spent outside its actions: optimizer, gradient reduction)\n",
               p->same.step_ms, 100.0 * p->same.bubble, p->outside_ms);
    if (p->host_ranks > p->host_cores && p->host_cores > 0)
        printf("note: %d ranks shared %d cores, so the measured bubble holds contention the plan leaves out\n",
               p->host_ranks, p->host_cores);
    printf("costs per step: layer %.3f ms, embedding %.3f ms, head %.3f ms (F = (F+B)/3, W = %.2f B)\n\n",
           p->costs.layer_ms, p->costs.embed_ms, p->costs.head_ms, p->costs.w_share);
    printf("  #  %-17s %2s %4s  %-24s %9s %8s %5s\n", "schedule", "V", "M", "layers per stage", "step ms", "bubble",
           "peak");
    for (int i = 0; i < p->n_layouts && i < top; i++) {
        const PlanLayout *l = &p->layouts[i];
        list_text(l->split, l->S, split, sizeof split);
        printf("%3d  %-17s %2d %4d  %-24s %9.3f %6.1f %% %5d\n", i + 1, l->schedule, l->V, l->M, split, l->step_ms,
               100.0 * l->bubble, l->peak_act);
    }
}

static cJSON *layout_json(const PlanLayout *l) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "schedule", l->schedule);
    cJSON_AddNumberToObject(o, "virtual", l->V);
    cJSON_AddNumberToObject(o, "microbatches", l->M);
    if (l->split) cJSON_AddItemToObject(o, "layers_per_stage", cJSON_CreateIntArray(l->split, l->S));
    cJSON_AddNumberToObject(o, "step_ms", l->step_ms);
    cJSON_AddNumberToObject(o, "bubble", l->bubble);
    cJSON_AddNumberToObject(o, "peak_activations", l->peak_act);
    return o;
}

static void print_json(const RunPlan *p, int top) {
    cJSON *o = cJSON_CreateObject();
    history_json_int64(o, "run", p->run);
    cJSON *m = cJSON_AddObjectToObject(o, "measured");
    cJSON_AddStringToObject(m, "schedule", p->schedule);
    cJSON_AddNumberToObject(m, "stages", p->P);
    cJSON_AddNumberToObject(m, "virtual", p->V);
    cJSON_AddNumberToObject(m, "microbatches", p->M);
    cJSON_AddItemToObject(m, "layers_per_stage", cJSON_CreateIntArray(p->split, p->S));
    cJSON_AddNumberToObject(m, "steps", p->steps);
    history_json_num(m, "step_ms", p->step_ms);
    history_json_num(m, "bubble", p->bubble);
    history_json_num(m, "outside_ms", p->outside_ms);
    cJSON_AddItemToObject(m, "stage_busy_ms", cJSON_CreateDoubleArray(p->busy_ms, p->S));
    if (p->same_ok) cJSON_AddItemToObject(o, "predicted", layout_json(&p->same));
    else cJSON_AddNullToObject(o, "predicted");
    cJSON *c = cJSON_AddObjectToObject(o, "costs_ms");
    cJSON_AddNumberToObject(c, "layer", p->costs.layer_ms);
    cJSON_AddNumberToObject(c, "embedding", p->costs.embed_ms);
    cJSON_AddNumberToObject(c, "head", p->costs.head_ms);
    cJSON *list = cJSON_AddArrayToObject(o, "layouts");
    for (int i = 0; i < p->n_layouts && i < top; i++) cJSON_AddItemToArray(list, layout_json(&p->layouts[i]));
    history_json_print(o);
}

void plan_from_run_print(const RunPlan *p, int top, bool json) {
    if (json) print_json(p, top);
    else print_text(p, top);
}
