// The failed step's line, naming the culprit (engine/hang_report.h).
#include "engine/hang_report.h"

#include <stdio.h>

// " at action 5 (B 2,mb 1)" or " in the norm and loss all-reduce"; *stage: the action's stage.
static void describe_point(const Schedule *s, int P, const ProgressCulprit *c, char *out, size_t cap, int *stage) {
    const ScheduleList *l = &s->ranks[c->rank % P];
    *stage = -1;
    for (int i = 0; i < s->n_stages && *stage < 0; i++)
        if (s->stage_rank[i] == c->rank % P) *stage = i;
    if (c->action >= 0 && c->action < l->n) {
        const Action a = l->actions[c->action];
        *stage = a.stage;
        snprintf(out, cap, " at action %d (%s %d,mb %d)", c->action, schedule_type_name(a.type), a.stage, a.mb);
    } else if (c->action == PROGRESS_GRADS) {
        snprintf(out, cap, " in the gradient all-reduce over replicas");
    } else if (c->action == PROGRESS_NORM) {
        snprintf(out, cap, " in the norm and loss all-reduce");
    } else {
        snprintf(out, cap, " between steps");
    }
}

void hang_report(const Schedule *s, int P, int self, const ProgressCulprit *c, Error *err) {
    const bool root = self == 0;
    if (c->rank < 0) return;
    char point[96];
    int stage = 0;
    describe_point(s, P, c, point, sizeof point, &stage);
    const Error own = *err;
    if (c->remote && root)   // its slot is on its own node: where it stopped is unknown here
        error_set(err, "rank %d (stage %d), on another node, went silent in step %d (the link or that node is "
                  "down, or the rank stopped); %s", c->rank, stage, c->step + 1, own.msg);
    else if (c->remote)
        error_set(err, "%s; waits on rank %d (stage %d), on another node, silent in step %d", own.msg, c->rank,
                  stage, c->step + 1);
    else if (root && c->dead)
        error_set(err, "rank %d (stage %d) died%s of step %d (its process is gone, silent for %.1f s); %s", c->rank,
                  stage, point, c->step + 1, c->stuck_s, own.msg);
    else if (root)
        error_set(err, "rank %d (stage %d) stopped making progress%s of step %d, silent for %.1f s; %s", c->rank, stage,
                  point, c->step + 1, c->stuck_s, own.msg);
    else if (c->rank == self)   // resumed after a SIGSTOP: the others waited on this rank
        error_set(err, "%s; this rank had stopped%s of step %d", own.msg, point, c->step + 1);
    else
        error_set(err, "%s; waits on rank %d (stage %d), %s%s of step %d", own.msg, c->rank, stage,
                  c->dead ? "died" : "stopped", point, c->step + 1);
}
