// Schedules: every generator valid and CSV round-trippable over a grid of (P, M, V); the
// simulator reproducing the paper formulas exactly; the validator and CSV loader refusing
// broken schedules with messages that say where.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine/schedule/schedule.h"
#include "engine/schedule/simulate.h"
#include "tests/unit/test_util.h"

#define TOL 1e-12

static Schedule *build(const char *name, int P, int M, int V) {
    Error err;
    Schedule *s = schedule_build(name, P, M, V, &err);
    CHECK(s != NULL, "%s P=%d M=%d V=%d: %s", name, P, M, V, err.msg);
    return s;
}

// Simulates; f, b, w per stage (w < 0: b / 2).
static int simulate(const Schedule *s, double f, double b, double w, SimResult *r) {
    Error err;
    int rc = sim_run(s, (SimCosts){f, b, w, 0.0}, r, &err);
    CHECK(rc == 0, "%s: %s", s->name, err.msg);
    return rc;
}

static char *dump(const Schedule *s, bool with_comm) {
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    CHECK(schedule_write_csv(s, f, with_comm) == 0, "write %s", s->name);
    fclose(f);
    return text;
}

static int count_type(const Schedule *s, ActionType t) {
    int n = 0;
    for (int r = 0; r < s->n_ranks; r++)
        for (int i = 0; i < s->ranks[r].n; i++) n += s->ranks[r].actions[i].type == t;
    return n;
}

// Dependencies between stages on different ranks, per microbatch: each is one message
// forward and one backward.
static int crossing_edges(const Schedule *s) {
    int n = 0;
    for (int st = 0; st + 1 < s->n_stages; st++) n += s->stage_rank[st] != s->stage_rank[st + 1];
    return n;
}

// Valid, lowered valid, CSV round trip in both forms, message count.
static void check_one(const Schedule *s) {
    Error err;
    char what[320];
    snprintf(what, sizeof what, "%s P=%d S=%d M=%d", s->name, s->n_ranks, s->n_stages, s->n_microbatches);
    CHECK(schedule_validate(s, &err) == 0, "%s: %s", what, err.msg);
    CHECK(!schedule_has_comm(s), "%s: generators emit compute only", what);
    Schedule *low = schedule_copy(s);
    schedule_lower(low);
    CHECK(schedule_validate(low, &err) == 0, "%s lowered: %s", what, err.msg);
    CHECK(schedule_check_fifo(low, &err) == 0, "%s lowered: not in NCCL's per-pair order: %s", what, err.msg);
    int sends = count_type(low, ACT_SEND_F) + count_type(low, ACT_SEND_B);
    CHECK(sends == 2 * crossing_edges(s) * s->n_microbatches, "%s: %d sends", what, sends);
    CHECK(count_type(low, ACT_RECV_F) + count_type(low, ACT_RECV_B) == sends, "%s: recvs match sends", what);

    // A file loads as what the pipeline runs for the built-in: weight gradients ordered, then
    // lowered (schedule_csv.c); so its plan and its bubble are the built-in's.
    Schedule *runs = schedule_copy(s);
    schedule_order_weight_grads(runs);
    char *plain = dump(s, false), *comm = dump(s, true), *plain_runs = dump(runs, false);
    schedule_lower(runs);
    Schedule *back = schedule_parse_csv(plain, "plain.csv", &err);
    CHECK(back && schedule_equal(back, runs), "%s: compute-only CSV loads as the schedule that runs: %s", what,
          back ? "differs" : err.msg);
    Schedule *back_comm = schedule_parse_csv(comm, "comm.csv", &err);
    CHECK(back_comm && schedule_equal(back_comm, runs), "%s: CSV with comm loads as the schedule that runs: %s", what,
          back_comm ? "differs" : err.msg);
    if (back) {
        char *again = dump(back, false);
        CHECK(strcmp(again, plain_runs) == 0, "%s: dump(load(dump)) == dump of what runs", what);
        free(again);
        SimResult a, b;
        const SimCosts costs = {.f = 1, .b = 2, .w = 1};
        if (sim_run(s, costs, &a, &err) == 0) {
            const bool ran = sim_run(back, costs, &b, &err) == 0;
            CHECK(ran && b.makespan == a.makespan && b.bubble == a.bubble,
                  "%s: the loaded file plans the built-in's bubble (%.1f%% vs %.1f%%)", what, 100 * b.bubble,
                  100 * a.bubble);
            for (int st = 0; ran && st < s->n_stages; st++)
                CHECK(b.peak_act[st] == a.peak_act[st], "%s: the loaded file's peak on stage %d is %d, the built-in's %d",
                      what, st, b.peak_act[st], a.peak_act[st]);
            sim_free(&a);
            if (ran) sim_free(&b);
        }
    }
    schedule_free(runs);
    free(plain_runs);
    schedule_free(back);
    schedule_free(back_comm);
    free(plain);
    free(comm);
    schedule_free(low);
}

// The V values to try for a registry row: its own when fixed, 1..3 otherwise.
static int virtual_range(const ScheduleInfo *info, int *first) {
    *first = info->virtual_fixed ? info->default_virtual : 1;
    return info->virtual_fixed ? info->default_virtual : 3;
}

// Every row of the registry over a grid of P, M and V. A generator may refuse an M it cannot
// lay out (the interleaved schedules' rounds) with a one-line reason, and a row M below its
// minimum (dualpipe-v: 2P) with a line that names the M that works, but never M a multiple of
// P from there on.
static void test_every_generator_valid(void) {
    for (const ScheduleInfo *info = SCHEDULE_REGISTRY; info < SCHEDULE_REGISTRY + SCHEDULE_COUNT; info++)
        for (int P = 1; P <= 6; P++)
            for (int M = 1; M <= 4 * P + 1; M++) {
                int V, V_last = virtual_range(info, &V);
                for (; V <= V_last; V++) {
                    Error err = {{0}};
                    Schedule *s = schedule_build(info->name, P, M, V, &err);
                    const int M_min = schedule_min_microbatches(info->name, P, V);
                    char works[64];
                    snprintf(works, sizeof works, "use --microbatches %d or more", M_min);
                    CHECK(s || (M < M_min ? strstr(err.msg, works) != NULL : M % P && err.msg[0]),
                          "%s P=%d M=%d V=%d: %s", info->name, P, M, V, err.msg);
                    CHECK(!s || strcmp(s->name, info->name) == 0, "%s names its schedule %s", info->name,
                          s ? s->name : "");
                    if (s) check_one(s);
                    schedule_free(s);
                }
            }
}

// Every row's ideal-bubble formula is what the simulator measures at the costs it assumes
// (F=1 B=2; F=I=W=1 for split backwards), M a multiple of P and at least 2P.
static void test_registry_ideal_bubble(void) {
    for (const ScheduleInfo *info = SCHEDULE_REGISTRY; info < SCHEDULE_REGISTRY + SCHEDULE_COUNT; info++)
        for (int P = 1; P <= 6; P++)
            for (int M = 2 * P; M <= 4 * P; M += P) {
                int V, V_last = virtual_range(info, &V);
                for (; V <= V_last; V++) {
                    Schedule *s = build(info->name, P, M, V);
                    SimResult r;
                    if (!s || simulate(s, 1, 2, 1, &r)) {
                        schedule_free(s);
                        continue;
                    }
                    char what[128];
                    snprintf(what, sizeof what, "%s P=%d M=%d V=%d: %s", info->name, P, M, V, info->ideal_formula);
                    CHECK_NEAR(r.bubble, info->ideal_bubble(P, M, V), TOL, what);
                    sim_free(&r);
                    schedule_free(s);
                }
            }
}

// The registry's names are unique, its defaults sane, and the lookups and the unknown-name
// message read it.
static void test_registry(void) {
    CHECK(SCHEDULE_COUNT >= 1, "the registry has rows");
    char names[256];
    schedule_names_text(names, sizeof names, false);
    Error err;
    CHECK(!schedule_build("2f2b", 2, 4, 0, &err), "unknown name refused");
    for (const ScheduleInfo *info = SCHEDULE_REGISTRY; info < SCHEDULE_REGISTRY + SCHEDULE_COUNT; info++) {
        CHECK(schedule_find(info->name) == info, "%s: found, and found once", info->name);
        CHECK(info->build && info->ideal_bubble && info->ideal_formula[0] && info->description[0] &&
                  info->default_virtual >= 1,
              "%s: a complete row", info->name);
        CHECK(schedule_default_virtual(info->name) == info->default_virtual &&
                  schedule_virtual_free(info->name) == !info->virtual_fixed,
              "%s: V lookups", info->name);
        CHECK(strstr(names, info->name) && strstr(err.msg, info->name), "%s listed in '%s' and '%s'", info->name,
              names, err.msg);
    }
    CHECK(!schedule_find("x.csv") && !schedule_virtual_free("x.csv") && schedule_default_virtual("x.csv") == 1,
          "a CSV is not a row");
}

// The one place a --schedule value becomes a schedule: a row built, or a file (named so, not a
// row) loaded with its own shape; the peak estimate and the help lines read the same table.
static void test_resolve(void) {
    CHECK(schedule_is_file("x.csv") && schedule_is_file("dir/1f1b.csv"), "a .csv path is a file");
    CHECK(!schedule_is_file("1f1b") && !schedule_is_file(".csv") && !schedule_is_file("x.csv.txt"),
          "a row's name, a bare suffix or another extension is no file");
    Error err;
    Schedule *built = schedule_build("1f1b", 4, 8, 0, &err), *named = schedule_resolve("1f1b", 4, 8, 0, &err);
    CHECK(built && named && schedule_equal(built, named), "a name resolves as schedule_build builds");
    char path[] = "/tmp/pptrain-resolve-XXXXXX.csv";
    const int fd = mkstemps(path, 4);
    FILE *f = fdopen(fd, "w");
    schedule_write_csv(built, f, false);
    fclose(f);
    Schedule *file = schedule_resolve(path, 99, 99, 7, &err);
    CHECK(file && file->n_ranks == 4 && file->n_microbatches == 8 && file->n_stages == 4,
          "a CSV brings its own shape: %s", file ? "" : err.msg);
    CHECK(fabs(schedule_peak_in_flight(path, 99, 99, 7, true) - 2.5) < 1e-12, "a file's peak, from the file");
    unlink(path);
    CHECK(!schedule_resolve("nope.csv", 4, 8, 0, &err) && strstr(err.msg, "nope.csv"), "a missing file: %s", err.msg);
    CHECK(!schedule_resolve("nope", 4, 8, 0, &err) && strstr(err.msg, "unknown schedule"), "a typo: %s", err.msg);
    // 1f1b at P=4: stage s holds P-s microbatches, so 2.5 on average and 4 on the first rank.
    CHECK(fabs(schedule_peak_in_flight("1f1b", 4, 8, 0, true) - 2.5) < 1e-12, "1f1b, one process");
    CHECK(fabs(schedule_peak_in_flight("1f1b", 4, 8, 0, false) - 4.0) < 1e-12, "1f1b, the busiest rank");
    CHECK(fabs(schedule_peak_in_flight("gpipe", 4, 8, 0, true) - 8.0) < 1e-12, "gpipe holds every microbatch");
    CHECK(schedule_peak_in_flight("nope", 4, 8, 0, true) == 8.0, "unresolvable: M, the most there can be");
    schedule_free(built);
    schedule_free(named);
    schedule_free(file);
    // The help lines name every row (--virtual: those with stages per rank), in table order.
    char help[512], vhelp[512], all[256], multi[256];
    schedule_option_help(help, sizeof help);
    schedule_virtual_help(vhelp, sizeof vhelp);
    schedule_names_text(all, sizeof all, false);
    schedule_names_text(multi, sizeof multi, true);
    CHECK(strncmp(help, all, strlen(all)) == 0 && strstr(help, "CSV"), "--schedule's help: %s", help);
    CHECK(strstr(vhelp, multi) && !strstr(vhelp, "gpipe"), "--virtual's help: %s", vhelp);
}

static void test_stage_maps(void) {
    CHECK(schedule_stage_rank(STAGE_MAP_PLAIN, 4, 4, 3) == 3, "plain");
    CHECK(schedule_stage_rank(STAGE_MAP_LOOP, 4, 8, 5) == 1, "loop: 5 %% 4");
    int v[8] = {0, 1, 2, 3, 3, 2, 1, 0};
    for (int st = 0; st < 8; st++) CHECK(schedule_stage_rank(STAGE_MAP_V, 4, 8, st) == v[st], "V map stage %d", st);
    const char *v_map[] = {"zb-v", "dualpipe-v"};
    for (int k = 0; k < 2; k++) {
        Schedule *s = build(v_map[k], 4, 8, 2);
        if (s) CHECK(s->stage_rank[4] == 3 && s->stage_rank[7] == 0, "%s uses the V map", v_map[k]);
        schedule_free(s);
    }
    Schedule *s = build("interleaved-zb", 4, 8, 3);
    if (s) CHECK(s->n_stages == 12 && s->stage_rank[4] == 0 && s->stage_rank[11] == 3, "interleaved-zb loops");
    schedule_free(s);
}

// GPipe and 1F1B with F=1, B=2: bubble (P-1)/(M+P-1), makespan 3(M+P-1).
static void test_bubble_plain(void) {
    for (int P = 1; P <= 8; P++) {
        int Ms[] = {P, 2 * P, 3 * P + 1, 1, P > 1 ? P - 1 : 1};
        for (int k = 0; k < 5; k++) {
            int M = Ms[k];
            const char *names[] = {"gpipe", "1f1b"};
            for (int n = 0; n < 2; n++) {
                Schedule *s = build(names[n], P, M, 1);
                SimResult r;
                if (!s || simulate(s, 1, 2, -1, &r)) {
                    schedule_free(s);
                    continue;
                }
                CHECK_NEAR(r.bubble, (double)(P - 1) / (M + P - 1), TOL, names[n]);
                CHECK_NEAR(r.makespan, 3.0 * (M + P - 1), TOL, names[n]);
                CHECK(r.messages == 2 * (P - 1) * M, "%s P=%d M=%d: %d messages", names[n], P, M, r.messages);
                int expect_peak0 = n == 0 ? M : (M < P ? M : P);
                CHECK(r.peak_act[0] == expect_peak0, "%s P=%d M=%d: peak on stage 0 %d, want %d", names[n], P, M,
                      r.peak_act[0], expect_peak0);
                sim_free(&r);
                schedule_free(s);
            }
        }
    }
}

// Interleaved 1F1B, each virtual stage doing 1/V of a rank's work (F=1/V, B=2/V), M % P == 0:
// bubble (P-1)/(V*M+P-1), the paper's (P-1)/(V*M) of ideal time.
static void test_bubble_interleaved(void) {
    for (int P = 1; P <= 8; P++)
        for (int V = 1; V <= 4; V++)
            for (int k = 1; k <= 3; k++) {
                int M = k * P;
                Schedule *s = build("interleaved-1f1b", P, M, V);
                SimResult r;
                if (!s || simulate(s, 1.0 / V, 2.0 / V, -1, &r)) {
                    schedule_free(s);
                    continue;
                }
                char what[64];
                snprintf(what, sizeof what, "interleaved P=%d V=%d M=%d", P, V, M);
                CHECK_NEAR(r.bubble, (double)(P - 1) / (V * M + P - 1), 1e-9, what);
                CHECK_NEAR(r.makespan, 3.0 * M + 3.0 * (P - 1) / V, 1e-9, what);
                CHECK(r.messages == 2 * (P > 1 ? P * V - 1 : 0) * M, "%s: %d messages", what, r.messages);
                sim_free(&r);
                schedule_free(s);
            }
}

static double idle(const SimResult *r, int P) {
    return r->bubble * P * r->makespan;
}

// ZB-H1 with F=I=W=1: idle (P-1)(F+I-W) = P-1 per rank, a third of 1F1B's (P-1)(F+B) with
// F=1, B=2; same peak activations.
static void test_bubble_zb_h1(void) {
    for (int P = 1; P <= 8; P++) {
        int Ms[] = {P, 2 * P, 3 * P + 1};
        for (int k = 0; k < 3; k++) {
            int M = Ms[k];
            Schedule *zb = build("zb-h1", P, M, 1), *base = build("1f1b", P, M, 1);
            SimResult rz, rb;
            if (!zb || !base || simulate(zb, 1, 2, 1, &rz)) goto done;
            if (simulate(base, 1, 2, -1, &rb)) {
                sim_free(&rz);
                goto done;
            }
            char what[64];
            snprintf(what, sizeof what, "zb-h1 P=%d M=%d", P, M);
            CHECK_NEAR(rz.bubble, (double)(P - 1) / (3 * M + P - 1), TOL, what);
            CHECK_NEAR(idle(&rz, P) * 3, idle(&rb, P), 1e-9, what);
            int peak_z = 0, peak_b = 0;
            for (int st = 0; st < P; st++) {
                if (rz.peak_act[st] > peak_z) peak_z = rz.peak_act[st];
                if (rb.peak_act[st] > peak_b) peak_b = rb.peak_act[st];
            }
            CHECK(peak_z == peak_b && rz.peak_act[0] == rb.peak_act[0] && peak_z == P,
                  "%s: peak %d (stage 0 %d) vs 1f1b %d (stage 0 %d)", what, peak_z, rz.peak_act[0], peak_b,
                  rb.peak_act[0]);
            sim_free(&rz);
            sim_free(&rb);
        done:
            schedule_free(zb);
            schedule_free(base);
        }
    }
}

// ZB-V with F=I=W=1 per stage and M >= 2P. Rank P-1 cannot start before stage P-1's first
// input has crossed P-1 ranks ((P-1) F), and every rank does the same 6M of work, so the
// makespan is at least 6M + P-1. ZB-V meets that bound exactly: the only idle time is the
// unavoidable fill (P-1 per rank), bubble (P-1)/(6M+P-1); the paper's "zero bubble" is this
// bound rounded to 0 for large M. Peak on stage 0: 2P half-size activations = 1F1B's P.
static void test_bubble_zb_v(void) {
    for (int P = 1; P <= 8; P++)
        for (int M = 2 * P; M <= 4 * P; M += P) {
            Schedule *s = build("zb-v", P, M, 2);
            SimResult r;
            if (!s || simulate(s, 1, 2, 1, &r)) {
                schedule_free(s);
                continue;
            }
            char what[64];
            snprintf(what, sizeof what, "zb-v P=%d M=%d", P, M);
            CHECK_NEAR(r.makespan, 6.0 * M + P - 1, TOL, what);
            CHECK_NEAR(r.bubble, (double)(P - 1) / (6 * M + P - 1), TOL, what);
            for (int rk = 0; rk < P; rk++) CHECK_NEAR(r.busy[rk], 6.0 * M, TOL, "zb-v busy per rank");
            CHECK(r.peak_act[0] == 2 * P, "%s: peak on stage 0 %d", what, r.peak_act[0]);
            CHECK(r.messages == 2 * (2 * P - 2) * M, "%s: %d messages (none between stages P-1 and P)", what,
                  r.messages);
            sim_free(&r);
            schedule_free(s);
        }
}

// DualPipeV at F=1 B=2 (I=W=1) per stage, M >= 2P: the same bound as ZB-V, met exactly (every
// rank busy 6M, idle only the P-1 of the fill) and the same activations, stage s holding 2P-s.
// The simulator times each OVERLAP_F_B pair as its F then its B, as a CPU rank runs it.
static void test_bubble_dualpipe_v(void) {
    for (int P = 1; P <= 8; P++)
        for (int M = 2 * P; M <= 4 * P + 1; M += P) {
            Schedule *s = build("dualpipe-v", P, M, 2);
            SimResult r;
            if (!s || simulate(s, 1, 2, 1, &r)) {
                schedule_free(s);
                continue;
            }
            char what[64];
            snprintf(what, sizeof what, "dualpipe-v P=%d M=%d", P, M);
            CHECK_NEAR(r.makespan, 6.0 * M + P - 1, TOL, what);
            CHECK_NEAR(r.bubble, (double)(P - 1) / (6 * M + P - 1), TOL, what);
            for (int rk = 0; rk < P; rk++) CHECK_NEAR(r.busy[rk], 6.0 * M, TOL, "dualpipe-v busy per rank");
            for (int st = 0; st < 2 * P; st++)
                CHECK(r.peak_act[st] == 2 * P - st, "%s: peak on stage %d %d", what, st, r.peak_act[st]);
            CHECK(r.messages == 2 * (2 * P - 2) * M, "%s: %d messages", what, r.messages);
            sim_free(&r);
            schedule_free(s);
        }
}

// Interleaved zero bubble, V stages per rank at F=I=W=1 each: the fill, P-1, is the only idle
// time (3VM of work per rank); V = 1 is ZB-H1, action for action.
static void test_bubble_interleaved_zb(void) {
    for (int P = 1; P <= 6; P++)
        for (int V = 1; V <= 4; V++)
            for (int M = 2 * P; M <= 4 * P; M += P) {
                Schedule *s = build("interleaved-zb", P, M, V);
                SimResult r;
                if (!s || simulate(s, 1, 2, 1, &r)) {
                    schedule_free(s);
                    continue;
                }
                char what[64];
                snprintf(what, sizeof what, "interleaved-zb P=%d V=%d M=%d", P, V, M);
                CHECK_NEAR(r.makespan, 3.0 * V * M + P - 1, TOL, what);
                CHECK(r.messages == 2 * (P > 1 ? P * V - 1 : 0) * M, "%s: %d messages", what, r.messages);
                if (V == 1) {
                    Schedule *h1 = build("zb-h1", P, M, 1);
                    CHECK(h1 && schedule_equal(s, h1), "%s: zb-h1's actions", what);
                    schedule_free(h1);
                }
                sim_free(&r);
                schedule_free(s);
            }
}

static void test_latency_and_render(void) {
    Schedule *s = build("1f1b", 2, 1, 1);
    SimResult r;
    Error err;
    if (!s) return;
    // F0 [0,1], message 0.5, F1 [1.5,2.5], B1 [2.5,4.5], message 0.5, B0 [5,7].
    CHECK(sim_run(s, (SimCosts){1, 2, -1, 0.5}, &r, &err) == 0, "%s", err.msg);
    CHECK_NEAR(r.makespan, 7.0, TOL, "latency adds once per message");
    sim_free(&r);
    CHECK(sim_run(s, (SimCosts){1, 2, -1, 0}, &r, &err) == 0, "%s", err.msg);
    char row[16];
    sim_render_row(&r, 0, 1.0, row, 6);
    CHECK(strcmp(row, "F...BB") == 0, "rank 0 row '%s'", row);
    sim_render_row(&r, 1, 1.0, row, 6);
    CHECK(strcmp(row, ".FBB..") == 0, "rank 1 row '%s'", row);
    sim_render_row(&r, 1, 0.5, row, 12);
    CHECK(strcmp(row, "..FFBBBB....") == 0, "rank 1 half-unit row '%s'", row);
    sim_free(&r);
    CHECK(sim_run(s, (SimCosts){1, 2, 2, 0}, &r, &err) == -1 && strstr(err.msg, "below the backward"), "W == B: %s",
          err.msg);
    CHECK(sim_run(s, (SimCosts){0, 2, -1, 0}, &r, &err) == -1 && strstr(err.msg, "positive"), "F = 0: %s", err.msg);
    schedule_free(s);
}

static void test_build_errors(void) {
    Error err;
    CHECK(!schedule_build("2f2b", 2, 2, 0, &err) && strstr(err.msg, "unknown schedule '2f2b'"), "%s", err.msg);
    CHECK(!schedule_build("zb-v", 2, 4, 3, &err) && strstr(err.msg, "--virtual must be 2"), "%s", err.msg);
    CHECK(!schedule_build("1f1b", 2, 4, 2, &err) && strstr(err.msg, "--virtual must be 1"), "%s", err.msg);
    CHECK(!schedule_build("gpipe", 0, 4, 1, &err) && strstr(err.msg, "at least 1"), "%s", err.msg);
    CHECK(!schedule_build("1f1b", 2, 0, 1, &err) && strstr(err.msg, "at least 1"), "%s", err.msg);
    CHECK(!schedule_build("interleaved-1f1b", 4, 9, 2, &err) && strstr(err.msg, "multiple"), "%s", err.msg);
    Schedule *ok = schedule_build("interleaved-1f1b", 4, 10, 2, &err);  // torch: rounds 2, 10 % 2 == 0
    CHECK(ok != NULL, "interleaved P=4 M=10: %s", ok ? "" : err.msg);
    schedule_free(ok);
    CHECK(schedule_default_virtual("zb-v") == 2 && schedule_default_virtual("1f1b") == 1, "default V");
    CHECK(!schedule_build("interleaved-zb", 4, 9, 2, &err) && strstr(err.msg, "interleaved-zb needs the microbatches "
                                                                          "to be a multiple of max(1, M / P) = 2"),
          "%s", err.msg);
    // DualPipeV needs a microbatch per stage, as torch does; the line says what works.
    CHECK(!schedule_build("dualpipe-v", 4, 6, 0, &err) &&
              strcmp(err.msg, "dualpipe-v needs at least 1 microbatch per stage: 4 ranks x 2 stages need M >= 8, "
                              "not 6; use --microbatches 8 or more, or --stages 3 or fewer for 6 microbatches") == 0,
          "%s", err.msg);
    CHECK(!schedule_build("dualpipe-v", 2, 1, 2, &err) && strstr(err.msg, "M >= 4, not 1; use --microbatches 4 or "
                                                                           "more") && !strstr(err.msg, "--stages"),
          "%s", err.msg);
    CHECK(!schedule_build("dualpipe-v", 2, 4, 1, &err) && strstr(err.msg, "--virtual must be 2"), "%s", err.msg);
    CHECK(schedule_min_microbatches("dualpipe-v", 3, 0) == 6 && schedule_min_microbatches("zb-v", 3, 0) == 1 &&
              schedule_min_microbatches("x.csv", 3, 0) == 1,
          "minimum M");
}

// Parses text, expecting failure with a message containing want.
static void expect_bad(const char *text, const char *want) {
    Error err = {{0}};
    Schedule *s = schedule_parse_csv(text, "t.csv", &err);
    CHECK(s == NULL && strstr(err.msg, want), "'%s': got '%s', want '%s'", text, s ? "(loaded)" : err.msg, want);
    schedule_free(s);
}

static void test_csv_malformed(void) {
    expect_bad("0F0,0X0\n1F0,1B0\n", "t.csv:1:5: bad action '0X0': unknown action type");
    expect_bad("0F0,-1B0\n", "t.csv:1:5: bad action '-1B0': negative stage");
    expect_bad("0F0,0B-1\n", "negative microbatch");
    expect_bad("0F0,0B\n", "t.csv:1:5: bad action '0B': missing microbatch");
    expect_bad("0F0, F1\n", "t.csv:1:6: bad action 'F1': expected a stage number");
    expect_bad("0F0,0F0x\n", "trailing characters");
    expect_bad("0F0,(0B0)OVERLAP\n", "t.csv:1:5: bad action '(0B0)OVERLAP': a group of actions must be '(...)OVERLAP_F_B'");
    expect_bad("0F0,(0B0;0SEND_F0)OVERLAP_F_B\n", "OVERLAP_F_B may hold compute actions only");
    expect_bad("0F0,0WAIT_RECV_F0,0B0\n", "t.csv:1:5: 0WAIT_RECV_F0: waits for a receive that is not posted");
    expect_bad("0F0,0F99999999999\n", "index too large");
    expect_bad("", "empty schedule");
    expect_bad("\n\n", "empty schedule");
    expect_bad("0F0,0F0,0B0,0B0\n", "t.csv: rank 0, action 1 (0F0): duplicate of rank 0, action 0");
    expect_bad("0F0,1F0,0B0\n1B0\n", "t.csv:2:1: stage 1 is on rank 1 here but on rank 0 at line 1, column 5");
    expect_bad("0F0,0B0\n2F0,2B0\n", "stage 1 appears on no rank");
    expect_bad("0F0,0F1,0B0\n", "stage 0, microbatch 1 has no backward");
    expect_bad("0F0,0B0,0B1\n", "stage 0, microbatch 1 has no forward");
    expect_bad("0B0,0F0\n", "t.csv: rank 0, action 0 (0B0): backward before its forward");
    expect_bad("0F0,0W0,0I0\n", "rank 0, action 1 (0W0): weight gradient before its input gradient");
    expect_bad("0F0,0I0\n", "rank 0, action 1 (0I0): input gradient without its weight gradient (W)");
    expect_bad("0F0,0I0,0W0,0B0\n", "split backward (I/W) beside a full backward (B)");
    // Rank 0 waits for 1B0 before sending 0F1; rank 1 waits for 0F1 before 1F0.
    expect_bad("0F0,0B0,0F1,0B1\n1F1,1B1,1F0,1B0\n",
               "deadlock, no rank can progress: rank 0 waits at action 1 (0B0) for 1B0 on rank 1; "
               "rank 1 waits at action 0 (1F1) for 0F1 on rank 0");
    // Lowered files: every message present, each beside the right compute.
    expect_bad("0F0,0SEND_F0,0RECV_B0,0B0\n1F0,1B0,1SEND_B0\n", "stage 1, microbatch 0: no RECV_F on rank 1");
    expect_bad("0F0,0SEND_F0,0RECV_B0,0B0\n1F0,1RECV_F0,1B0,1SEND_B0\n",
               "rank 1, action 0 (1F0): forward before its receive of activations");
    expect_bad("0SEND_F0,0F0,0RECV_B0,0B0\n1RECV_F0,1F0,1B0,1SEND_B0\n",
               "rank 0, action 0 (0SEND_F0): send of activations before its forward");
    expect_bad("0F0,0SEND_F0,1F0,1B0,0B0\n", "the next stage is on the same rank; no message");
    expect_bad("0F0,0RECV_F0,0B0\n", "stage 0 has no previous stage");
}

// An overlapped pair (torch's OVERLAP_F_B) survives a CSV round trip as one cell, and the
// validator refuses a pair with no second part (issue 29: dualpipe-v's pairs were written
// as two cells, and torch lost them).
static void test_csv_overlap(void) {
    Error err = {{0}};
    const char *text = "0F0,(0F1;0B0)OVERLAP_F_B,0B1\n1F0,1B0,1F1,1B1\n";
    Schedule *s = schedule_parse_csv(text, "pair.csv", &err);
    CHECK(s != NULL, "pair.csv: %s", err.msg);
    if (!s) return;
    int pairs = 0;
    for (int i = 0; i < s->ranks[0].n; i++) pairs += s->ranks[0].actions[i].overlap_next;
    CHECK(pairs == 1, "pair.csv: %d overlapped actions on rank 0, want 1 (0F1 with 0B0)", pairs);
    char *back = dump(s, false);
    CHECK(strcmp(back, text) == 0, "pair.csv written back: %s", back);
    free(back);
    Schedule *bare = schedule_copy(s);
    ScheduleList *row = &bare->ranks[1];
    int last = row->n - 1;
    while (schedule_is_comm(row->actions[last].type)) last--;
    row->actions[last].overlap_next = true;
    CHECK(schedule_validate(bare, &err) == -1 && strstr(err.msg, "overlapped with no compute action after it"),
          "a pair without its second part: %s", err.msg);
    schedule_free(bare);
    schedule_free(s);
}

static void test_csv_accepts(void) {
    Error err;
    // torch's idle slots (empty cells), spaces, CRLF, a trailing blank line.
    Schedule *s = schedule_parse_csv(",0F0, 0F1 ,,0B0,0B1\r\n,,1F0,1B0,1F1,1B1\r\n\r\n", "ok.csv", &err);
    CHECK(s != NULL, "%s", s ? "" : err.msg);
    if (s) {
        CHECK(s->n_ranks == 2 && s->n_stages == 2 && s->n_microbatches == 2, "inferred shape %d %d %d", s->n_ranks,
              s->n_stages, s->n_microbatches);
        CHECK(schedule_has_comm(s), "compute-only file is lowered");
        Schedule *ref = build("1f1b", 2, 2, 1);
        if (ref) {
            schedule_lower(ref);
            CHECK(schedule_equal(s, ref), "the file is torch's 1F1B for P=2, M=2");
        }
        schedule_free(ref);
    }
    schedule_free(s);
    // The V map comes back from the file.
    Schedule *v = build("zb-v", 3, 6, 2);
    if (v) {
        char *text = dump(v, false);
        Schedule *back = schedule_parse_csv(text, "v.csv", &err);
        CHECK(back && back->stage_rank[3] == 2 && back->stage_rank[5] == 0, "V map inferred");
        schedule_free(back);
        free(text);
    }
    schedule_free(v);
    CHECK(schedule_load_csv("/nonexistent/s.csv", &err) == NULL && strstr(err.msg, "--schedule: /nonexistent/s.csv: no such file"),
          "%s", err.msg);
}

// A schedule whose second rank takes microbatch 1 before 0 is valid (sends are buffered) but
// cannot run over a transport that matches messages in order (NCCL): the check says where.
static void test_fifo_order(void) {
    Error err;
    Schedule *s = schedule_parse_csv("0F0,0F1,0B1,0B0\n1F1,1B1,1F0,1B0\n", "swap.csv", &err);
    CHECK(s != NULL, "%s", s ? "" : err.msg);
    if (!s) return;
    CHECK(schedule_validate(s, &err) == 0, "swap.csv is a valid schedule: %s", err.msg);
    CHECK(schedule_check_fifo(s, &err) == -1 &&
              strstr(err.msg, "stage 0 sends its activations to stage 1 in another order") &&
              strstr(err.msg, "0SEND_F0") && strstr(err.msg, "1RECV_F1"),
          "%s", err.msg);
    schedule_free(s);
}

// Errors the CSV loader cannot produce (it infers the map): actions on the wrong rank or
// outside the shape, checked on hand-built schedules.
static void test_validate_ownership(void) {
    Error err;
    Schedule *s = schedule_new("hand", 2, 2, 1, STAGE_MAP_PLAIN);
    schedule_push(s, 0, ACT_F, 0, 0);
    schedule_push(s, 0, ACT_F, 1, 0);
    CHECK(schedule_validate(s, &err) == -1 && strcmp(err.msg, "rank 0, action 1 (1F0): stage 1 belongs to rank 1") == 0,
          "%s", err.msg);
    schedule_free(s);
    s = schedule_new("hand", 1, 1, 2, STAGE_MAP_PLAIN);
    schedule_push(s, 0, ACT_F, 0, 2);
    CHECK(schedule_validate(s, &err) == -1 && strstr(err.msg, "(0F2): outside 1 stages x 2 microbatches"), "%s",
          err.msg);
    schedule_free(s);
}

// Random edits of a valid CSV: the loader never crashes, and whatever it accepts is a valid,
// simulatable schedule.
static void test_csv_fuzz(void) {
    Schedule *s = build("zb-h1", 3, 4, 1);
    if (!s) return;
    char *text = dump(s, true);
    schedule_free(s);
    const char alphabet[] = "0123456789FBIWSENDRCV_,\n -";
    unsigned long long state = 12345;
    int accepted = 0, runs = 3000;
    for (int k = 0; k < runs; k++) {
        char *t = strdup(text);
        size_t len = strlen(t);
        for (int e = 0; e < 1 + k % 3; e++) {
            state = state * 6364136223846793005ULL + 1442695040888963407ULL;
            t[(state >> 33) % len] = alphabet[(state >> 17) % (sizeof alphabet - 1)];
        }
        Error err;
        Schedule *got = schedule_parse_csv(t, "fuzz.csv", &err);
        if (got) {
            SimResult r;
            accepted++;
            CHECK(sim_run(got, (SimCosts){1, 2, 1, 0}, &r, &err) == 0, "accepted '%s' but: %s", t, err.msg);
            sim_free(&r);
        } else {
            CHECK(strncmp(err.msg, "fuzz.csv", 8) == 0, "error names the file: %s", err.msg);
        }
        schedule_free(got);
        free(t);
    }
    CHECK(accepted < runs, "most random edits are refused (%d of %d accepted)", accepted, runs);
    free(text);
}

static void test_format(void) {
    char buf[32];
    CHECK(strcmp(schedule_format_action((Action){ACT_SEND_F, 0, 3, false}, buf, sizeof buf), "0SEND_F3") == 0, "%s", buf);
    CHECK(strcmp(schedule_format_action((Action){ACT_W, 12, 7, false}, buf, sizeof buf), "12W7") == 0, "%s", buf);
}

// s without its messages.
static Schedule *compute_only(const Schedule *s) {
    Schedule *c = schedule_copy(s);
    for (int r = 0; r < c->n_ranks; r++) {
        ScheduleList *l = &c->ranks[r];
        int n = 0;
        for (int i = 0; i < l->n; i++)
            if (!schedule_is_comm(l->actions[i].type)) l->actions[n++] = l->actions[i];
        l->n = n;
    }
    return c;
}

// Weight gradients in microbatch order (engine/schedule/schedule_order.c): every built-in ends valid
// and in order; looped BFS by permuting its backward (same shape, same simulated timeline
// length); a reversed CSV backward, and a lowered one, by deferring W.
static void test_weight_order(void) {
    const char *names[] = {"gpipe", "1f1b", "zb-h1", "interleaved-1f1b", "looped-bfs", "zb-v", "interleaved-zb",
                           "dualpipe-v"};
    for (size_t n = 0; n < sizeof names / sizeof names[0]; n++)
        for (int P = 1; P <= 4; P++)
            for (int M = 1; M <= 9; M++) {
                Error err;
                Schedule *s = schedule_build(names[n], P, M, 0, &err);
                if (!s) continue;   // a shape the generator refuses
                Schedule *o = schedule_copy(s);
                const int changed = schedule_order_weight_grads(o);
                CHECK(schedule_weight_order_ok(o) && schedule_validate(o, &err) == 0, "%s P=%d M=%d: %s", names[n],
                      P, M, err.msg);
                CHECK(changed == (strcmp(names[n], "looped-bfs") == 0 && M > 1), "%s P=%d M=%d: changed %d",
                      names[n], P, M, changed);
                for (int r = 0; r < P; r++)
                    CHECK(o->ranks[r].n == s->ranks[r].n, "%s P=%d M=%d rank %d: %d actions, was %d", names[n], P, M,
                          r, o->ranks[r].n, s->ranks[r].n);
                schedule_free(o);
                schedule_free(s);
            }
    // Backward in reverse: permuted when that stays valid, else the early B runs as I and its W
    // waits (here microbatch 1 runs first everywhere, so the permutation would put rank 1's
    // 1B0 before its 1F0).
    const struct { const char *csv, *rank1; } cases[] = {
        {"0F0,0F1,0B0,0B1\n1F0,1F1,1B1,1B0\n", "1F0 1F1 1B0 1B1 "},
        {"0F1,0F0,0B1,0B0\n1F1,1B1,1F0,1B0\n", "1F1 1I1 1F0 1B0 1W1 "},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        Error err;
        Schedule *lowered = schedule_parse_csv(cases[c].csv, "rev.csv", &err);
        CHECK(lowered != NULL, "rev.csv: %s", err.msg);
        if (!lowered) continue;
        Schedule *s = compute_only(lowered);   // the loader orders and lowers (schedule_csv.c)
        schedule_free(lowered);
        CHECK(schedule_weight_order_ok(s) && schedule_order_weight_grads(s) == 0, "reversed backward rewritten on load");
        char buf[32], row[256] = "";
        for (int i = 0; i < s->ranks[1].n; i++) {
            strcat(row, schedule_format_action(s->ranks[1].actions[i], buf, sizeof buf));
            strcat(row, " ");
        }
        CHECK(strcmp(row, cases[c].rank1) == 0, "case %zu: rank 1 runs '%s', want '%s'", c, row, cases[c].rank1);
        CHECK(schedule_weight_order_ok(s) && schedule_validate(s, &err) == 0, "rewritten: %s", err.msg);
        schedule_free(s);
    }
    Error err;
    Schedule *s;
    // Lowered (with comm): permuting would move messages, so W is deferred.
    s = build("looped-bfs", 2, 3, 2);
    schedule_lower(s);
    const int before = schedule_total_actions(s);
    CHECK(schedule_order_weight_grads(s) == 1 && schedule_weight_order_ok(s) && schedule_validate(s, &err) == 0,
          "lowered looped-bfs: %s", err.msg);
    CHECK(schedule_total_actions(s) == before + 2 * 2 * 2, "each stage's 2 early B become I + W: %d actions, was %d",
          schedule_total_actions(s), before);
    schedule_free(s);
}

int main(void) {
    test_weight_order();
    test_format();
    test_stage_maps();
    test_build_errors();
    test_registry();
    test_resolve();
    test_every_generator_valid();
    test_registry_ideal_bubble();
    test_bubble_plain();
    test_bubble_interleaved();
    test_bubble_zb_h1();
    test_bubble_zb_v();
    test_bubble_dualpipe_v();
    test_bubble_interleaved_zb();
    test_latency_and_render();
    test_csv_malformed();
    test_csv_accepts();
    test_csv_overlap();
    test_validate_ownership();
    test_fifo_order();
    test_csv_fuzz();
    return test_finish();
}
