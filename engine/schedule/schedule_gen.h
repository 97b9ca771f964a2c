// engine/schedule/schedule_gen: the built-in generators, private to engine/schedule (the
// registry in schedule_registry.c is their only caller). Each takes P ranks, M microbatches
// and V stages per rank, already checked by schedule_build (P, M, V >= 1; V equal to the row's
// default where the row fixes it; M at least the row's minimum), and returns the compute-only
// schedule, or NULL with err for arguments only the generator can judge (the rounds of
// interleaved-1f1b and interleaved-zb).
#ifndef PPTRAIN_SCHEDULE_GEN_H
#define PPTRAIN_SCHEDULE_GEN_H
#include "engine/schedule/schedule.h"

Schedule *schedule_gen_gpipe(int P, int M, int V, Error *err);
Schedule *schedule_gen_1f1b(int P, int M, int V, Error *err);
Schedule *schedule_gen_interleaved_1f1b(int P, int M, int V, Error *err);
Schedule *schedule_gen_looped_bfs(int P, int M, int V, Error *err);
Schedule *schedule_gen_zb_h1(int P, int M, int V, Error *err);
Schedule *schedule_gen_interleaved_zb(int P, int M, int V, Error *err);
Schedule *schedule_gen_zb_v(int P, int M, int V, Error *err);
Schedule *schedule_gen_dualpipe_v(int P, int M, int V, Error *err);
#endif
