// tests/unit/test_transport_registry.c: the tests of engine/transport/transport_registry.
// engine/transport/transport_registry: the one table of transports. Every row is complete and
// found by its name; the help, the parser's error words and the pipeline's choices read it; a
// row opens its transport (local here: the MPI ones need mpirun, tests/cli/cli_mpi.sh).
#include <string.h>

#include "engine/schedule/schedule.h"
#include "engine/transport/transport_registry.h"
#include "test_util.h"

static void test_rows(void) {
    CHECK(TRANSPORT_COUNT >= 3, "local, mpi and nccl at least: %d rows", TRANSPORT_COUNT);
    for (int i = 0; i < TRANSPORT_COUNT; i++) {
        const TransportInfo *t = transport_info((TransportKind)i);
        TransportKind back = (TransportKind)-1;
        CHECK(t->name && t->name[0] && (t->open || (t->missing && t->missing[0])),
              "row %d: a name, and an open function or why not", i);
        CHECK(transport_kind_parse(t->name, &back) == 0 && back == (TransportKind)i, "%s parses to its row", t->name);
        CHECK(strcmp(transport_kind_name((TransportKind)i), t->name) == 0, "%s named back", t->name);
        // A transport whose collectives take device memory runs one rank per process.
        CHECK(!t->device_collectives || t->multi_process, "%s: device collectives, one process per rank", t->name);
    }
    TransportKind k;
    CHECK(transport_kind_parse("tcp", &k) == -1 && transport_kind_parse("", &k) == -1, "another word is refused");
    CHECK(!transport_multi_process(TRANSPORT_KIND_LOCAL) && transport_multi_process(TRANSPORT_KIND_MPI) &&
              transport_multi_process(TRANSPORT_KIND_NCCL),
          "local runs threads; mpi and nccl processes");
    CHECK(!transport_device_collectives(TRANSPORT_KIND_MPI) && transport_device_collectives(TRANSPORT_KIND_NCCL),
          "only nccl sums device memory");
}

// The help's "local|mpi|nccl" and the error's "local, mpi or nccl" are the table's names.
static void test_names_text(void) {
    char bar[128], words[128];
    transport_names_text(bar, sizeof bar, "|");
    transport_names_text(words, sizeof words, NULL);
    CHECK(strcmp(bar, "local|mpi|nccl") == 0, "help: '%s'", bar);
    CHECK(strcmp(words, "local, mpi or nccl") == 0, "error words: '%s'", words);
    char tiny[6];
    transport_names_text(tiny, sizeof tiny, "|");
    CHECK(strlen(tiny) == 5, "cut to its buffer: '%s'", tiny);
}

// The local row opens a world of P x D ranks in this process, which is rank 0's.
static void test_open_local(void) {
    Error err;
    Schedule *s = schedule_build("1f1b", 2, 4, 0, &err);
    const TransportSetup setup = {.P = 2, .D = 2, .sched = s, .msg_bytes = 64, .capacity = 4, .timeout_s = 5.0};
    TransportOpened opened;
    CHECK(transport_open(TRANSPORT_KIND_LOCAL, &setup, &opened, &err) == 0, "local opens: %s", err.msg);
    CHECK(opened.tp && opened.tp->n_ranks == 4 && opened.tp->n_pipe == 2 && opened.self == 0 && opened.gpu == -1,
          "a world of 4 ranks, this process rank 0's, no GPU chosen");
    const char msg[8] = "abcdefg";
    char got[8] = "";
    const int tag = transport_tag(MSG_ACT, 0, 0, s->n_stages);
    CHECK(transport_send(opened.tp, 0, 1, tag, msg, sizeof msg, &err) == TRANSPORT_OK &&
              transport_recv(opened.tp, 1, 0, tag, got, sizeof got, &err) == TRANSPORT_OK && !strcmp(got, msg),
          "a message from rank 0 to rank 1: '%s'", got);
    transport_free(opened.tp);
    schedule_free(s);
}

int main(void) {
    test_rows();
    test_names_text();
    test_open_local();
    return test_finish();
}
