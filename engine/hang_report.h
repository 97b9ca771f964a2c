// engine/hang_report: the one line a failed step prints, with the rank that stopped making
// progress named (engine/transport/progress.h, issue 12 §4). Rank 0 leads with the culprit:
//   "rank 2 (stage 2) stopped making progress at action 5 (B 2,mb 1) of step 3, silent for 10.2 s;
//    rank 0 (stage 0): timed out after 10 s waiting at action 4 (RECV_B 0,mb 1)"
// ("died", "its process is gone", when it was killed); every other rank ends its own line with
// whom it waits on: "...; waits on rank 2 (stage 2), stopped at action 5 (B 2,mb 1) of step 3".
// A culprit on another node (its progress unreadable here) is named without a point:
//   "rank 1 (stage 1), on another node, went silent in step 3 (the link or that node is down,
//    or the rank stopped); rank 0 (stage 0): timed out after 5 s waiting at action 6 (RECV_B 0,mb 1)"
#ifndef PPTRAIN_HANG_REPORT_H
#define PPTRAIN_HANG_REPORT_H
#include <stdbool.h>

#include "engine/error.h"
#include "engine/schedule/schedule.h"
#include "engine/transport/progress.h"

// Rewrites err (the failed rank's own line) around culprit c; leaves it when c names no rank.
// s: the run's schedule, P pipeline ranks (world rank r runs list r % P); self: this world rank
// (0 leads with the culprit; local threads report as rank 0).
void hang_report(const Schedule *s, int P, int self, const ProgressCulprit *c, Error *err);
#endif
