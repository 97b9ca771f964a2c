// `pptrain plan`: simulate a schedule without a model. Builds the schedule by name (or loads
// a torch-format CSV), checks it against the layer count, times it under a cost model and
// prints a per-rank timeline with the bubble, makespan, peak activations and messages. With
// --from-run, ranks every layout at a stored run's measured costs instead (console/plan_from_run.c).
#include "console/cmd/cmd_plan.h"

#include <cjson/cJSON.h>
#include <ctype.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "console/cli.h"
#include "console/cli_options.h"
#include "console/cmd/plan_from_run_print.h"
#include "engine/partition.h"
#include "engine/schedule/schedule.h"
#include "engine/schedule/simulate.h"
#include "storage/db.h"

#define TIMELINE_MAX_COLS 120

typedef struct {
    int stages, microbatches, virt;  // 0: not given
    int layers;                      // 0: the model's
    int seq;                         // T, for the model's layer costs
    ModelConfig model;               // the split is train's: partition_balance_model
    const char *schedule;
    double cost[3];                  // F, B, W through one rank's share of layers (W < 0: B/2)
    bool cost_model;                 // --cost model: W from the model's weight-gradient share
    double latency;
    const char *from_run;            // --from-run RUN; NULL: plan from --cost
    const char *db;                  // the run store --from-run reads; NULL: DB_DEFAULT_PATH
    int top;                         // --from-run: layouts listed; 0: 10
    bool json, dump_csv, with_comm, list, help;
} PlanOptions;

static int set_int(int *field, const char *flag, const char *v, long max, Error *err) {
    long x;
    if (cli_parse_int(flag, v, 1, max, &x, err)) return -1;
    *field = (int)x;
    return 0;
}

#define INT_OPTION(fn, field, max) \
    static int fn(void *o, const char *f, const char *v, Error *e) { \
        return set_int(&((PlanOptions *)o)->field, f, v, max, e); \
    }
INT_OPTION(set_stages, stages, 1024)
INT_OPTION(set_mbs, microbatches, 100000)
INT_OPTION(set_virtual, virt, 64)
INT_OPTION(set_layers, layers, 1024)
INT_OPTION(set_seq, seq, 1 << 20)
INT_OPTION(set_top, top, 100000)

static int set_from_run(void *opts, const char *flag, const char *v, Error *err) {
    PlanOptions *o = opts;
    (void)flag, (void)err;
    o->from_run = v;
    return 0;
}

static int set_db(void *opts, const char *flag, const char *v, Error *err) {
    PlanOptions *o = opts;
    (void)flag, (void)err;
    o->db = v;
    return 0;
}

// As train reads --model: a value that does not look like a path is a preset name.
static int set_model(void *opts, const char *flag, const char *v, Error *err) {
    PlanOptions *o = opts;
    (void)flag;
    const bool looks_like_path = strchr(v, '/') || strstr(v, ".json") || access(v, F_OK) == 0;
    return looks_like_path ? model_config_from_json(&o->model, v, err) : model_config_preset(&o->model, v, err);
}

static int set_schedule(void *opts, const char *flag, const char *v, Error *err) {
    PlanOptions *o = opts;
    (void)flag;
    (void)err;
    o->schedule = v;
    return 0;
}

static int set_cost(void *opts, const char *flag, const char *v, Error *err) {
    PlanOptions *o = opts;
    o->cost_model = strcmp(v, "model") == 0;
    if (o->cost_model) return 0;   // set once --model and --seq are known (plan_check)
    if (!isdigit((unsigned char)v[0]) && v[0] != '.') {
        error_set(err, "%s: '%s' needs F,B, F,B,W or model", flag, v);
        return -1;
    }
    double c[3];
    int n = cli_parse_float_list(flag, v, c, 3, err);
    if (n < 0) return -1;
    if (n < 2) {
        error_set(err, "%s: '%s' needs F,B or F,B,W", flag, v);
        return -1;
    }
    SimCosts sc = {c[0], c[1], n == 3 ? c[2] : -1.0, 0.0};
    Error why;
    if (sim_check_costs(sc, &why)) {
        error_set(err, "%s %s: %s", flag, v, why.msg);
        return -1;
    }
    o->cost[0] = c[0];
    o->cost[1] = c[1];
    o->cost[2] = n == 3 ? c[2] : c[1] / 2;
    return 0;
}

static int set_latency(void *opts, const char *flag, const char *v, Error *err) {
    PlanOptions *o = opts;
    return cli_parse_float(flag, v, 0.0, 1e12, &o->latency, err);
}

CLI_SWITCH_SETTER(set_json, PlanOptions, json)
CLI_SWITCH_SETTER(set_dump, PlanOptions, dump_csv)
CLI_SWITCH_SETTER(set_with_comm, PlanOptions, with_comm)
CLI_SWITCH_SETTER(set_list, PlanOptions, list)
CLI_SWITCH_SETTER(set_help, PlanOptions, help)

static const CliOption OPTIONS[] = {
    {"--stages", "P", "pipeline ranks (with a schedule name; a CSV has its own)", set_stages, 0},
    {"--microbatches", "M", "microbatches per step (with a schedule name; a CSV has its own)", set_mbs, 0},
    {"--schedule", "NAME|FILE.csv", NULL, set_schedule, 0},  // help: option_help, from the registry
    {"--virtual", "V", NULL, set_virtual, 0},
    {"--cost", "F,B[,W]|model",
     "time of one microbatch's forward, backward, and the weight-gradient part of the backward, through one "
     "rank's layers (default 1,2; W defaults to B/2); each of a rank's V stages takes 1/V of it. model: 1,2 and "
     "W the weight-gradient share of the backward in --model's FLOPs at --seq",
     set_cost, 0},
    {"--latency", "T", "time added to every message between ranks (default 0)", set_latency, 0},
    {"--model", "NAME|CONFIG.json", "the model whose layers the stages split, as train takes it (default tiny)",
     set_model, 0},
    {"--seq", "T", "tokens per sequence, for the layer costs that balance the split (default 64)", set_seq, 0},
    {"--layers", "L", "decoder layers the stages split (default: the model's; every stage needs one)", set_layers, 0},
    {"--json", NULL, "print the numbers as one JSON object", set_json, 0},
    {"--dump-csv", NULL, "print the schedule as CSV (torch.distributed.pipelining format)", set_dump, 0},
    {"--with-comm", NULL, "with --dump-csv: torch's compute_comms form (SEND/RECV, WAIT_SEND, ...)", set_with_comm, 0},
    {"--from-run", "RUN|latest",
     "rank every schedule, split, M and V by step time predicted from the run's measured stage times", set_from_run, 0},
    {"--db", "FILE", "with --from-run: the run store (default pptrain.db)", set_db, 0},
    {"--top", "N", "with --from-run: the layouts listed (default 10)", set_top, 0},
    {"--list", NULL, "print the built-in schedules as a Markdown table (README.md holds it)", set_list, 0},
    {"--help", NULL, "this help", set_help, 0},
};
#define N_OPTIONS (sizeof OPTIONS / sizeof OPTIONS[0])

// The help lines that name schedules read the registry (engine/schedule/schedule.h).
static void plan_text(const CliOption *o, char *arg, size_t arg_size, char *help, size_t help_size) {
    (void)arg, (void)arg_size;
    if (o->set == set_schedule) schedule_option_help(help, help_size);
    else if (o->set == set_virtual) schedule_virtual_help(help, help_size);
}

static void usage(FILE *out) {
    fprintf(out, "usage: pptrain plan --stages P --microbatches M [--schedule NAME|FILE.csv] [options]\n\n");
    cli_options_usage(out, OPTIONS, (int)N_OPTIONS, 28, NULL, plan_text);
}

// The registry as README.md's table (tests/cli/cli_plan.sh checks that the README holds it).
static void print_registry(void) {
    printf("| schedule | V | ideal bubble | what it does |\n|---|---|---|---|\n");
    for (const ScheduleInfo *info = SCHEDULE_REGISTRY; info < SCHEDULE_REGISTRY + SCHEDULE_COUNT; info++)
        printf("| %s | %d%s | %s | %s |\n", info->name, info->default_virtual, info->virtual_fixed ? "" : " (any)",
               info->ideal_formula, info->description);
}

// --from-run searches the layouts itself, for the run's own model, ranks and batch at its
// measured costs: a layout or cost flag would be ignored, as --top would be without it.
static const char *const FROM_RUN_UNUSED[] = {"--stages", "--microbatches", "--schedule", "--virtual", "--cost",
                                              "--latency", "--model", "--seq", "--layers", NULL};

static int refuse_layout_flags(int argc, char **argv, Error *err) {
    for (int i = 2; i < argc; i++) {
        const CliOption *opt = cli_option_find(OPTIONS, (int)N_OPTIONS, argv[i]);
        if (!opt) continue;
        for (const char *const *u = FROM_RUN_UNUSED; *u; u++)
            if (strcmp(*u, opt->flag) == 0) {
                error_set(err, "%s does not apply to --from-run: it ranks every schedule, V, M and split for the "
                               "run's own model and stages at its measured costs", opt->flag);
                return -1;
            }
        if (opt->arg) i++;   // its value
    }
    return 0;
}

static int parse_options(int argc, char **argv, PlanOptions *o, Error *err) {
    *o = (PlanOptions){.seq = 64, .schedule = "1f1b", .cost = {1.0, 2.0, 1.0}, };
    model_config_preset(&o->model, "tiny", err);
    const CliCommand command = {"plan", OPTIONS, (int)N_OPTIONS, false, "--", NULL, NULL};
    if (cli_options_parse(&command, argc, argv, 2, o, NULL, err)) return -1;
    if (o->with_comm && !o->dump_csv) {
        error_set(err, "--with-comm only applies to --dump-csv");
        return -1;
    }
    if (!o->from_run && (o->db || o->top)) {
        error_set(err, "%s only applies to --from-run", o->db ? "--db" : "--top");
        return -1;
    }
    if (o->from_run && refuse_layout_flags(argc, argv, err)) return -1;
    if (!o->db) o->db = DB_DEFAULT_PATH;
    if (!o->top) o->top = 10;
    if (o->from_run && o->dump_csv) {
        error_set(err, "--from-run ranks layouts; --dump-csv prints one schedule: choose one");
        return -1;
    }
    if (o->json && o->dump_csv) {
        error_set(err, "--json and --dump-csv print different things; choose one");
        return -1;
    }
    if (o->layers) o->model.layers = o->layers;
    o->layers = o->model.layers;
    if (o->cost_model) {
        o->cost[0] = 1.0;
        o->cost[1] = 2.0;
        o->cost[2] = 2.0 * partition_weight_share(&o->model, o->seq);
    }
    return 0;
}

// A CSV brings its own P, M and V; flags that were given must agree with it.
static int check_csv_shape(const PlanOptions *o, const Schedule *s, Error *err) {
    if (o->stages && o->stages != s->n_ranks) {
        error_set(err, "--stages %d, but %s has %d ranks (rows)", o->stages, s->name, s->n_ranks);
        return -1;
    }
    if (o->microbatches && o->microbatches != s->n_microbatches) {
        error_set(err, "--microbatches %d, but %s has %d microbatches", o->microbatches, s->name, s->n_microbatches);
        return -1;
    }
    if (o->virt && o->virt * s->n_ranks != s->n_stages) {
        error_set(err, "--virtual %d, but %s has %d stages on %d ranks", o->virt, s->name, s->n_stages, s->n_ranks);
        return -1;
    }
    return 0;
}

static Schedule *make_schedule(const PlanOptions *o, Error *err) {
    if (schedule_is_file(o->schedule)) {
        Schedule *s = schedule_resolve(o->schedule, 0, 0, 0, err);
        if (s && check_csv_shape(o, s, err)) {
            schedule_free(s);
            return NULL;
        }
        return s;
    }
    if (schedule_is_builtin(o->schedule) && (!o->stages || !o->microbatches)) {
        error_set(err, "plan: --stages and --microbatches are required with --schedule %s", o->schedule);
        return NULL;
    }
    return schedule_resolve(o->schedule, o->stages, o->microbatches, o->virt, err);
}

// The layer split the stages would get; refuses more stages than layers.
static int split_layers(const PlanOptions *o, const Schedule *s, int *counts, Error *err) {
    if (s->n_stages > o->layers) {
        error_set(err, "%s: %d stages (%d ranks x %d per rank) need at least %d layers, --layers is %d", s->name,
                  s->n_stages, s->n_ranks, s->n_stages / s->n_ranks, s->n_stages, o->layers);
        return -1;
    }
    return partition_balance_model(&o->model, o->seq, s->n_stages, counts, err);  // the split train makes
}

static void print_list(const char *label, const int *v, int n) {
    printf("%s", label);
    for (int k = 0; k < n; k++) printf("%s%d", k ? "," : " ", v[k]);
    printf("\n");
}

static bool has_split_backward(const Schedule *s) {
    for (int r = 0; r < s->n_ranks; r++)
        for (int i = 0; i < s->ranks[r].n; i++)
            if (s->ranks[r].actions[i].type == ACT_W) return true;
    return false;
}

// One character per `unit` of time: the shortest action when the whole run fits in
// TIMELINE_MAX_COLS columns, else makespan / TIMELINE_MAX_COLS.
static void print_timeline(const SimResult *r, SimCosts c, bool split) {
    double unit = split ? fmin(c.f, fmin(c.w, c.b - c.w)) : fmin(c.f, c.b);
    if (r->makespan / unit > TIMELINE_MAX_COLS) unit = r->makespan / TIMELINE_MAX_COLS;
    int width = (int)ceil(r->makespan / unit - 1e-9);
    char *row = xmalloc((size_t)width + 1);
    printf("timeline (1 char = %g time unit%s; F forward, B backward, I input grad, W weight grad, . idle)\n", unit,
           unit == 1.0 ? "" : "s");
    for (int rank = 0; rank < r->schedule->n_ranks; rank++) {
        sim_render_row(r, rank, unit, row, width);
        printf("rank %-3d |%s|\n", rank, row);
    }
    free(row);
}

static void print_text(const Schedule *s, const SimResult *r, SimCosts c, const int *split) {
    printf("%s: %d ranks, %d stages, %d microbatches\n", s->name, s->n_ranks, s->n_stages, s->n_microbatches);
    bool split_bwd = has_split_backward(s);
    if (split_bwd)
        printf("cost per stage and microbatch: F=%g I=%g W=%g, latency %g\n", c.f, c.b - c.w, c.w, c.latency);
    else
        printf("cost per stage and microbatch: F=%g B=%g, latency %g\n", c.f, c.b, c.latency);
    print_timeline(r, c, split_bwd);
    printf("bubble %.2f%%  makespan %g  messages %d\n", 100.0 * r->bubble, r->makespan, r->messages);
    print_list("peak activations per stage:", r->peak_act, s->n_stages);
    print_list("layers per stage:", split, s->n_stages);
}

static void print_json(const Schedule *s, const SimResult *r, const int *split) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "schedule", s->name);
    cJSON_AddNumberToObject(o, "stages", s->n_ranks);
    cJSON_AddNumberToObject(o, "microbatches", s->n_microbatches);
    if (s->n_stages % s->n_ranks == 0) cJSON_AddNumberToObject(o, "virtual", s->n_stages / s->n_ranks);
    else cJSON_AddNullToObject(o, "virtual");
    cJSON_AddNumberToObject(o, "total_stages", s->n_stages);
    cJSON_AddNumberToObject(o, "bubble", r->bubble);
    cJSON_AddNumberToObject(o, "makespan", r->makespan);
    cJSON_AddItemToObject(o, "peak_activations", cJSON_CreateIntArray(r->peak_act, s->n_stages));
    cJSON_AddNumberToObject(o, "messages", r->messages);
    cJSON_AddItemToObject(o, "busy", cJSON_CreateDoubleArray(r->busy, s->n_ranks));
    cJSON_AddItemToObject(o, "layers_per_stage", cJSON_CreateIntArray(split, s->n_stages));
    char *text = cJSON_PrintUnformatted(o);
    if (text) printf("%s\n", text);
    free(text);
    cJSON_Delete(o);
}

// Simulates s and prints the result. Costs are per rank's share of layers; a stage takes
// P/S of them (1/V).
static int report(const PlanOptions *o, const Schedule *s, const int *split, Error *err) {
    double share = (double)s->n_ranks / s->n_stages;
    SimCosts c = {o->cost[0] * share, o->cost[1] * share, o->cost[2] * share, o->latency};
    SimResult r;
    if (sim_run(s, c, &r, err)) return -1;
    if (o->json) print_json(s, &r, split);
    else print_text(s, &r, c, split);
    sim_free(&r);
    return 0;
}

// --from-run: the layouts ranked at the run's measured costs (console/plan_from_run.h).
static int plan_measured(const PlanOptions *o) {
    RunPlan plan;
    Error err;
    if (plan_from_run_build(o->db, o->from_run, &plan, &err)) return cli_fail(&err);
    plan_from_run_print(&plan, o->top, o->json);
    plan_from_run_free(&plan);
    return 0;
}

int cmd_plan(int argc, char **argv) {
    PlanOptions o;
    Error err;
    if (parse_options(argc, argv, &o, &err)) return cli_fail(&err);
    if (o.help) {
        usage(stdout);
        return 0;
    }
    if (o.list) {
        print_registry();
        return 0;
    }
    if (o.from_run) return plan_measured(&o);
    Schedule *s = make_schedule(&o, &err);
    if (!s) return cli_fail(&err);
    int *split = xmalloc(sizeof(int) * (size_t)s->n_stages);
    int rc = split_layers(&o, s, split, &err);
    if (rc == 0 && o.dump_csv && (rc = schedule_write_csv(s, stdout, o.with_comm)))
        error_set(&err, "plan: error writing the CSV to stdout");
    else if (rc == 0 && !o.dump_csv)
        rc = report(&o, s, split, &err);
    free(split);
    schedule_free(s);
    return rc ? cli_fail(&err) : 0;
}
