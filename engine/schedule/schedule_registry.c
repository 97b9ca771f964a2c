// engine/schedule/schedule_registry: the one table that names the built-in schedules
// (schedule.h), and the one place a --schedule value (a row's name or a CSV path) becomes a
// schedule. Adding a schedule is a generator in schedule_gen.c and a row here; --help, errors,
// `plan`, the console's setup list, the README's table and the tests all read the table.
#include <stdio.h>
#include <string.h>

#include "engine/schedule/schedule_gen.h"

// Textbook bubbles (P ranks, M microbatches, V stages per rank) at the costs `plan` defaults
// to: F=1 B=2, and F=I=W=1 for the split backwards. The tests hold the simulator to them.
static double bubble_flat(int P, int M, int V) {
    (void)V;
    return (P - 1.0) / (M + P - 1.0);
}
static double bubble_looped(int P, int M, int V) { return (P - 1.0) / ((double)V * M + P - 1.0); }
static double bubble_zb_h1(int P, int M, int V) {
    (void)V;
    return (P - 1.0) / (3.0 * M + P - 1.0);
}
static double bubble_zb_v(int P, int M, int V) {
    (void)V;
    return (P - 1.0) / (6.0 * M + P - 1.0);
}

// The zero-bubble schedules with several stages per rank idle only for the fill, (P-1)F at
// F = 1 per stage, against 3VM of work per rank: zb-v and dualpipe-v are its V = 2. DualPipeV
// overlaps a forward with a backward to hide communication, which this equal-cost,
// free-message model cannot show: it times the pair as the F and then the B.
static double bubble_zb_looped(int P, int M, int V) { return (P - 1.0) / (3.0 * V * M + P - 1.0); }

const ScheduleInfo SCHEDULE_REGISTRY[] = {
    {"gpipe", schedule_gen_gpipe, 1, true, 0, bubble_flat, "(P-1)/(M+P-1)",
     "every forward, then every backward (GPipe); M microbatches of activations on every stage"},
    {"1f1b", schedule_gen_1f1b, 1, true, 0, bubble_flat, "(P-1)/(M+P-1)",
     "warm-up forwards, then one forward and one backward in turn (PipeDream-flush); stage s holds P-s"},
    {"interleaved-1f1b", schedule_gen_interleaved_1f1b, 2, false, 0, bubble_looped, "(P-1)/(VM+P-1)",
     "1F1B over V stages per rank, stage s on rank s mod P (Megatron); M a multiple of max(1, M/P)"},
    {"looped-bfs", schedule_gen_looped_bfs, 2, false, 0, bubble_looped, "(P-1)/(VM+P-1)",
     "V stages per rank, every microbatch through one before the next (breadth first)"},
    {"zb-h1", schedule_gen_zb_h1, 1, true, 0, bubble_zb_h1, "(P-1)/(3M+P-1)",
     "1F1B with the backward split into I and W, W's delayed into the cooldown (zero bubble H1)"},
    {"interleaved-zb", schedule_gen_interleaved_zb, 2, false, 0, bubble_zb_looped, "(P-1)/(3VM+P-1)",
     "zero bubble H1 over V stages per rank, stage s on rank s mod P; M a multiple of max(1, M/P)"},
    {"zb-v", schedule_gen_zb_v, 2, true, 0, bubble_zb_v, "(P-1)/(6M+P-1)",
     "zero bubble over 2P stages in a V: rank r holds stages r and 2P-1-r (ZB-V)"},
    {"dualpipe-v", schedule_gen_dualpipe_v, 2, true, 1, bubble_zb_v, "(P-1)/(6M+P-1)",
     "DualPipeV (DeepSeek) on zb-v's V: one chunk's forward paired with the other's full backward; M >= 2P"},
};
const int SCHEDULE_COUNT = (int)(sizeof SCHEDULE_REGISTRY / sizeof SCHEDULE_REGISTRY[0]);

const ScheduleInfo *schedule_find(const char *name) {
    for (int i = 0; i < SCHEDULE_COUNT; i++)
        if (strcmp(name, SCHEDULE_REGISTRY[i].name) == 0) return &SCHEDULE_REGISTRY[i];
    return NULL;
}

bool schedule_is_builtin(const char *name) { return schedule_find(name) != NULL; }

int schedule_default_virtual(const char *name) {
    const ScheduleInfo *info = schedule_find(name);
    return info ? info->default_virtual : 1;
}

bool schedule_virtual_free(const char *name) {
    const ScheduleInfo *info = schedule_find(name);
    return info && !info->virtual_fixed;
}

int schedule_min_microbatches(const char *name, int P, int V) {
    const ScheduleInfo *info = schedule_find(name);
    if (!info) return 1;
    if (V == 0) V = info->default_virtual;
    const long long m = (long long)info->min_m_per_stage * P * V;
    return m > 1 ? (int)m : 1;
}

void schedule_names_text(char *buf, size_t size, bool multi_stage_only) {
    size_t len = 0;
    buf[0] = '\0';
    for (int i = 0; i < SCHEDULE_COUNT && len < size; i++) {
        if (multi_stage_only && SCHEDULE_REGISTRY[i].default_virtual == 1) continue;
        len += (size_t)snprintf(buf + len, size - len, "%s%s", len ? ", " : "", SCHEDULE_REGISTRY[i].name);
    }
}

static int check_virtual(const ScheduleInfo *info, int V, Error *err) {
    if (!info->virtual_fixed || V == info->default_virtual) return 0;
    if (info->default_virtual == 1)
        error_set(err, "%s runs one stage per rank; --virtual must be 1, not %d", info->name, V);
    else
        error_set(err, "%s runs exactly %d stages per rank; --virtual must be %d, not %d", info->name,
                  info->default_virtual, info->default_virtual, V);
    return -1;
}

// A row with a minimum M (dualpipe-v: one microbatch per stage, as torch requires) refuses
// fewer with a line that names the fewest microbatches for these ranks and the most ranks for
// these microbatches.
static int check_microbatches(const ScheduleInfo *info, int P, int M, int V, Error *err) {
    const int per_rank = info->min_m_per_stage * V;
    if (per_rank == 0 || M >= per_rank * P) return 0;
    char fewer[96] = "";
    if (M >= per_rank)
        snprintf(fewer, sizeof fewer, ", or --stages %d or fewer for %d microbatches", M / per_rank, M);
    error_set(err, "%s needs at least %d microbatch%s per stage: %d ranks x %d stages need M >= %d, not %d; "
                   "use --microbatches %d or more%s", info->name, info->min_m_per_stage,
              info->min_m_per_stage == 1 ? "" : "es", P, V, per_rank * P, M, per_rank * P, fewer);
    return -1;
}

Schedule *schedule_build(const char *name, int P, int M, int V, Error *err) {
    const ScheduleInfo *info = schedule_find(name);
    if (!info) {
        char names[256];
        schedule_names_text(names, sizeof names, false);
        error_set(err, "unknown schedule '%s' (%s, or a .csv file)", name, names);
        return NULL;
    }
    if (V == 0) V = info->default_virtual;
    if (P < 1 || M < 1 || V < 1) {
        error_set(err, "%s: stages (%d), microbatches (%d) and virtual stages (%d) must each be at least 1", name, P, M,
                  V);
        return NULL;
    }
    if ((long long)P * V * M > 10000000LL) {
        error_set(err, "%s: %lld stages x %d microbatches is more than 10^7 actions", name, (long long)P * V, M);
        return NULL;
    }
    if (check_virtual(info, V, err) || check_microbatches(info, P, M, V, err)) return NULL;
    return info->build(P, M, V, err);
}

void schedule_option_help(char *buf, size_t size) {
    char names[256];
    schedule_names_text(names, sizeof names, false);
    snprintf(buf, size, "%s, or a CSV file in torch's format (default 1f1b)", names);
}

void schedule_virtual_help(char *buf, size_t size) {
    char names[256];
    schedule_names_text(names, sizeof names, true);
    snprintf(buf, size, "stages per rank for %s (default 2; 1 for the others)", names);
}

bool schedule_is_file(const char *name) {
    const size_t len = strlen(name);
    return !schedule_is_builtin(name) && len > 4 && strcmp(name + len - 4, ".csv") == 0;
}

Schedule *schedule_resolve(const char *name, int P, int M, int V, Error *err) {
    if (schedule_is_file(name)) return schedule_load_csv(name, err);
    return schedule_build(name, P, M, V, err);
}
