// console/cmd/history_samples: the model's samples (train --sample-every) in `pptrain history`:
// their share of the run's time in `show`, each sample in `show --json`, and in `compare` the
// runs' samples side by side at the steps where every run took one.
#ifndef PPTRAIN_HISTORY_SAMPLES_H
#define PPTRAIN_HISTORY_SAMPLES_H
#include <cjson/cJSON.h>
#include <stdbool.h>

#include "console/cmd/history_format.h"
#include "storage/db.h"

// Sampling as its own share of the time: samples' seconds over the steps' step_ms and the
// samples together (a sample's time is in no step's step_ms and no bubble).
typedef struct {
    int samples;
    double seconds;           // the samples' time
    double step_seconds;      // the steps' time: the sum of their step_ms
    double share;             // seconds / (seconds + step_seconds); NaN without either
} HistorySampling;

// The text in double quotes, escaped as the console shows it (tui_sample_escape), quotes as \".
void history_sample_print_quoted(const char *text);
HistorySampling history_sampling(const DbStep *steps, int n_steps, const DbSample *sm, int n_sm);
// "  sampling: 20 samples in 0.46 s, 0.3% of the time in steps and samples" (nothing without samples).
void history_sampling_print(const HistorySampling *s);
// "sampling": {"samples", "seconds", "share"} and "samples": [{"step", "tokens", "seconds",
// "text"}] into obj; the text as UTF-8 (invalid bytes as U+FFFD).
void history_samples_json(cJSON *obj, const DbSample *sm, int n, const HistorySampling *s);

// `compare`: the steps where each of the runs took a sample, and each run's text there. Reads
// the samples, run by run; 0, or -1 with err. Then prints them (nothing when no step is shared),
// or returns them as a JSON array [{"step", "texts": [one per run]}].
typedef struct {
    int n_runs;
    DbSample *sm[HISTORY_MAX_RUNS];   // each run's samples, in step order
    int n_sm[HISTORY_MAX_RUNS];
} HistorySampleSets;
// Adds the samples of one more run (start from a zeroed set).
int history_sample_sets_add(Db *db, int64_t run, HistorySampleSets *s, Error *err);
void history_sample_sets_free(HistorySampleSets *s);
void history_samples_compare_print(const DbRunInfo *runs, const HistorySampleSets *s);
cJSON *history_samples_compare_json(const HistorySampleSets *s);
#endif
