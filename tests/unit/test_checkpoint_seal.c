// tests/unit/test_checkpoint_seal.c: the tests of storage/checkpoint_seal.
// storage/checkpoint_seal: checksums.sha256 covers every file it lists, trainer_state.json
// included; any edit, a missing file, a malformed line or a seal without the state is refused
// with one line naming the file; a folder without a seal is reported as such (1), not accepted
// silently as sealed.
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "storage/atomic_file.h"
#include "storage/checkpoint_seal.h"
#include "test_util.h"

static char g_dir[64];

static void put(const char *name, const char *text) {
    char path[200];
    Error err;
    snprintf(path, sizeof path, "%s/%s", g_dir, name);
    CHECK(atomic_write_file(path, text, strlen(text), &err) == 0, "write %s: %s", name, err.msg);
}

// The seal over shard.bin and trainer_state.json as they are now.
static void seal(void) {
    CkptFile shard = {.path = "shard.bin", .stage = 0};
    char path[200], state_sha[65];
    Error err;
    snprintf(path, sizeof path, "%s/shard.bin", g_dir);
    CHECK(file_sha256(path, shard.sha256, &shard.bytes, &err) == 0, "hash: %s", err.msg);
    snprintf(path, sizeof path, "%s/%s", g_dir, CKPT_STATE_FILE);
    CHECK(file_sha256(path, state_sha, NULL, &err) == 0, "hash: %s", err.msg);
    CHECK(ckpt_seal_write(g_dir, &shard, 1, state_sha, &err) == 0, "seal: %s", err.msg);
}

static void expect_refused(const char *what, const char *needle) {
    Error err = {{0}};
    CHECK(ckpt_seal_verify(g_dir, &err) == -1 && strstr(err.msg, needle), "%s: %s", what, err.msg);
}

int main(void) {
    snprintf(g_dir, sizeof g_dir, "/tmp/pptrain_seal_XXXXXX");
    if (!mkdtemp(g_dir)) return perror("mkdtemp"), 1;
    Error err = {{0}};
    CHECK(ckpt_seal_verify(g_dir, &err) == 1, "no seal: reported as unsealed");
    put("shard.bin", "weights");
    put(CKPT_STATE_FILE, "{\"step\": 2}");
    seal();
    CHECK(ckpt_seal_verify(g_dir, &err) == 0, "sealed folder verifies: %s", err.msg);

    put(CKPT_STATE_FILE, "{\"step\": 3}");
    expect_refused("edited state", "trainer_state.json: sha256 does not match checksums.sha256");
    put(CKPT_STATE_FILE, "{\"step\": 2}");
    put("shard.bin", "weightz");
    expect_refused("edited shard", "shard.bin: sha256 does not match");
    put("shard.bin", "weights");
    CHECK(ckpt_seal_verify(g_dir, &err) == 0, "restored folder verifies again: %s", err.msg);

    char path[200];
    snprintf(path, sizeof path, "%s/shard.bin", g_dir);
    unlink(path);
    expect_refused("missing file", "shard.bin is missing");
    put("shard.bin", "weights");

    // A node-local copy holds only its own node's shards: ckpt_seal_verify_small checks every
    // other file (the state among them) and leaves the shards to be checked as they are read.
    put("model-00002-of-00002.safetensors", "stage 1");
    CkptFile shards[2] = {{.path = "shard.bin"}, {.path = "model-00002-of-00002.safetensors", .stage = 1}};
    snprintf(path, sizeof path, "%s/model-00002-of-00002.safetensors", g_dir);
    file_sha256(path, shards[1].sha256, &shards[1].bytes, &err);
    snprintf(path, sizeof path, "%s/shard.bin", g_dir);
    file_sha256(path, shards[0].sha256, &shards[0].bytes, &err);
    char state_sha[65];
    snprintf(path, sizeof path, "%s/%s", g_dir, CKPT_STATE_FILE);
    file_sha256(path, state_sha, NULL, &err);
    CHECK(ckpt_seal_write(g_dir, shards, 2, state_sha, &err) == 0, "seal with a shard: %s", err.msg);
    snprintf(path, sizeof path, "%s/model-00002-of-00002.safetensors", g_dir);
    unlink(path);
    expect_refused("another node's shard, all checked", "model-00002-of-00002.safetensors is missing");
    CHECK(ckpt_seal_verify_small(g_dir, &err) == 0, "another node's shard, small files checked: %s", err.msg);
    put(CKPT_STATE_FILE, "{\"step\": 3}");
    CHECK(ckpt_seal_verify_small(g_dir, &err) == -1 && strstr(err.msg, "trainer_state.json: sha256 does not match"),
          "small files checked: an edited state is still refused: %s", err.msg);
    put(CKPT_STATE_FILE, "{\"step\": 2}");
    snprintf(path, sizeof path, "%s/shard.bin", g_dir);
    put(CKPT_SEAL_FILE, "not a checksum line\n");
    expect_refused("malformed line", "line 1 is not");
    put(CKPT_SEAL_FILE, "0000000000000000000000000000000000000000000000000000000000000000  ../etc/passwd\n");
    expect_refused("a path, not a file name", "line 1 is not");
    char only_shard[200];
    int64_t bytes;
    char sha[65];
    file_sha256(path, sha, &bytes, &err);
    snprintf(only_shard, sizeof only_shard, "%s  shard.bin\n", sha);
    put(CKPT_SEAL_FILE, only_shard);
    expect_refused("a seal without the state", "does not list trainer_state.json");

    char cmd[120];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_dir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", g_dir);
    return test_finish();
}
