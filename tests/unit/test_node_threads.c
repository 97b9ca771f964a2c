// tests/unit/test_node_threads.c: the tests of engine/transport/node_threads.
// engine/transport/node_threads: the rule that gives each rank of an mpirun job its share of
// the node's cores, and the line that says when ranks outnumber cores.
#include <string.h>

#include "engine/transport/node_threads.h"
#include "test_util.h"

static void test_plan(void) {
    // 4 ranks on 2 cores: one thread each, and still more threads than cores.
    NodeThreads t = node_threads_plan(4, 2, 2, NULL);
    CHECK(t.threads == 1 && t.oversubscribed && !t.explicit_env, "4 ranks on 2 cores: %d threads", t.threads);
    // 2 ranks on 16 cores, each bound to 8 (mpirun --bind-to socket): 8 each.
    t = node_threads_plan(2, 16, 8, "");
    CHECK(t.threads == 8 && !t.oversubscribed, "2 ranks on 16 cores: %d", t.threads);
    // A rank bound to 1 core takes 1, whatever the node has.
    t = node_threads_plan(2, 16, 1, NULL);
    CHECK(t.threads == 1 && !t.oversubscribed, "bound to one core: %d", t.threads);
    // 3 ranks on 8 cores: 2 each (the 2 left over stay free rather than uneven).
    t = node_threads_plan(3, 8, 8, NULL);
    CHECK(t.threads == 2 && !t.oversubscribed, "3 ranks on 8 cores: %d", t.threads);
    // OMP_NUM_THREADS as the user set it, even when it oversubscribes.
    t = node_threads_plan(2, 2, 2, "4");
    CHECK(t.threads == 4 && t.explicit_env && t.oversubscribed, "OMP_NUM_THREADS=4 honoured: %d", t.threads);
    t = node_threads_plan(2, 2, 2, "0");
    CHECK(t.threads == 1, "OMP_NUM_THREADS=0 means 1: %d", t.threads);
}

static void test_describe(void) {
    char line[256] = "";
    NodeThreads t = node_threads_plan(4, 2, 2, NULL);
    CHECK(node_threads_describe(&t, line, sizeof line) > 0 &&
              strcmp(line, "4 ranks x 1 thread share 2 cores on this node: they take turns, so steps are slower and "
                           "the bubble larger than the schedule's") == 0,
          "oversubscribed line: %s", line);
    line[0] = '\0';
    t = node_threads_plan(2, 2, 2, NULL);
    CHECK(node_threads_describe(&t, line, sizeof line) == 0 && line[0] == '\0', "no line when ranks fit");
}

int main(void) {
    test_plan();
    test_describe();
    return test_finish();
}
