// engine/schedule/schedule_forward: the forward-only schedule an evaluation (validation loss)
// runs on the training schedule's ranks and stage placement.
//
// Each rank runs its stages in increasing order and, on each, every microbatch in order;
// lowering adds the messages. A stage waits only on the stage before it, which its rank (or
// an earlier one) runs first, and sends never block, so it cannot deadlock; a slot lives from
// its RECV_F to its SEND_F (the runtime frees it after its last use), one or two per stage.
#include <string.h>

#include "engine/schedule/schedule.h"

Schedule *schedule_forward_only(const Schedule *train) { return schedule_forward_only_m(train, train->n_microbatches); }

Schedule *schedule_forward_only_m(const Schedule *train, int M) {
    const int S = train->n_stages;
    // The stage map only seeds stage_rank, which the training schedule's placement then
    // overwrites; PLAIN requires one stage per rank, so a multi-stage rank (looped, V) seeds LOOP.
    const StageMap seed = S == train->n_ranks ? STAGE_MAP_PLAIN : STAGE_MAP_LOOP;
    Schedule *s = schedule_new("forward", train->n_ranks, S, M, seed);
    memcpy(s->stage_rank, train->stage_rank, sizeof(int) * (size_t)S);
    for (int stage = 0; stage < S; stage++)
        for (int mb = 0; mb < M; mb++) schedule_push(s, s->stage_rank[stage], ACT_F, stage, mb);
    schedule_lower(s);
    return s;
}
