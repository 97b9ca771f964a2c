// tests/unit/test_checkpoint_spread.c: the tests of storage/checkpoint_spread.
// storage/checkpoint_spread: the root's small files reach a rank's own folder. Packed and
// placed into an empty folder they are byte for byte the root's; placed where the folder
// already holds them nothing is rewritten (the same inode: on a shared filesystem no rank
// renames onto the root's files); a stale copy is replaced; a pack cut anywhere, a misnamed
// file or a length past its end is refused with one line, and nothing of it is written. The
// model's identity files (storage/model_identity.h) travel too where the root has them, a
// binary tokenizer.model byte for byte.
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "storage/atomic_file.h"
#include "storage/checkpoint.h"
#include "storage/checkpoint_seal.h"
#include "storage/checkpoint_spread.h"
#include "storage/model_identity.h"
#include "test_util.h"

static char g_root[64], g_copy[80];

static void put(const char *dir, const char *name, const char *text) {
    char path[200];
    Error err;
    snprintf(path, sizeof path, "%s/%s", dir, name);
    CHECK(atomic_write_file(path, text, strlen(text), &err) == 0, "write %s: %s", name, err.msg);
}

static bool same_file(const char *name) {
    char a[200], b[200];
    snprintf(a, sizeof a, "%s/%s", g_root, name);
    snprintf(b, sizeof b, "%s/%s", g_copy, name);
    Error err;
    char *x = file_read_text(a, 1 << 20, &err), *y = file_read_text(b, 1 << 20, &err);
    const bool same = x && y && strcmp(x, y) == 0;
    free(x);
    free(y);
    return same;
}

// Two identity files placed beside the others: a JSON one and a binary tokenizer.model (its
// NUL bytes must survive the pack), then the pack refused when cut inside them.
static void identity_files_travel(void) {
    static const char model[] = "sp\0model\1\0end";
    char root[100], copy[120], path[200];
    Error err = {{0}};
    snprintf(root, sizeof root, "%s/ident", g_root);
    snprintf(copy, sizeof copy, "%s/ident/copy", g_root);
    CHECK(file_make_dirs(copy, &err) == 0, "%s", err.msg);
    put(root, CKPT_INDEX_FILE, "{}");
    put(root, CKPT_CONFIG_FILE, "{}");
    put(root, "generation_config.json", "{\"eos_token_id\": [2, 7]}");
    snprintf(path, sizeof path, "%s/tokenizer.model", root);
    CHECK(atomic_write_file(path, model, sizeof model, &err) == 0, "%s", err.msg);
    put(root, CKPT_SEAL_FILE, "0000  x\n");
    put(root, CKPT_STATE_FILE, "{\"step\": 4}");
    size_t n = 0;
    char *pack = ckpt_spread_pack(root, &n, &err);
    CHECK(pack && ckpt_spread_place(copy, pack, n, &err) == 0, "pack and place: %s", err.msg);
    size_t got = 0;
    snprintf(path, sizeof path, "%s/tokenizer.model", copy);
    char *bytes = file_read_bytes(path, 1 << 20, &got, &err);
    CHECK(bytes && got == sizeof model && memcmp(bytes, model, got) == 0, "tokenizer.model: %zu bytes arrived", got);
    free(bytes);
    snprintf(path, sizeof path, "%s/generation_config.json", copy);
    char *gen = file_read_text(path, 1 << 20, &err);
    CHECK(gen && strcmp(gen, "{\"eos_token_id\": [2, 7]}") == 0, "generation_config.json arrived");
    free(gen);
    snprintf(path, sizeof path, "%s/tokenizer.json", copy);
    CHECK(access(path, F_OK) != 0, "a file the root lacks is not made up");
    const char *at = pack ? strstr(pack, "tokenizer.model\n") : NULL;
    CHECK(at && ckpt_spread_place(copy, pack, (size_t)(at - pack) + 20, &err) == -1 &&
              strstr(err.msg, "arrived malformed"), "cut inside tokenizer.model: %s", err.msg);
    free(pack);
}

static ino_t inode(const char *dir, const char *name) {
    char path[200];
    struct stat sb;
    snprintf(path, sizeof path, "%s/%s", dir, name);
    return stat(path, &sb) == 0 ? sb.st_ino : 0;
}

static bool folder_is_empty(const char *dir) {
    char cmd[200];
    snprintf(cmd, sizeof cmd, "test $(ls -A '%s' | wc -l) -eq 0", dir);
    return system(cmd) == 0;
}

int main(void) {
    snprintf(g_root, sizeof g_root, "/tmp/pptrain_spread_XXXXXX");
    if (!mkdtemp(g_root)) return perror("mkdtemp"), 1;
    snprintf(g_copy, sizeof g_copy, "%s/copy", g_root);
    Error err = {{0}};
    CHECK(file_make_dirs(g_copy, &err) == 0, "copy folder: %s", err.msg);
    put(g_root, CKPT_INDEX_FILE, "{\"weight_map\": {}}\n");
    put(g_root, CKPT_CONFIG_FILE, "{\"hidden_size\": 64}");
    put(g_root, CKPT_SEAL_FILE, "0000  x\n");
    put(g_root, CKPT_STATE_FILE, "{\"step\": 4}");

    size_t n = 0;
    char *pack = ckpt_spread_pack(g_root, &n, &err);
    CHECK(pack && n > 0, "pack: %s", err.msg);
    if (!pack) return test_finish();
    CHECK(ckpt_spread_place(g_copy, pack, n, &err) == 0, "place into an empty folder: %s", err.msg);
    const char *names[] = {CKPT_INDEX_FILE, CKPT_CONFIG_FILE, CKPT_SEAL_FILE, CKPT_STATE_FILE};
    for (int i = 0; i < 4; i++) CHECK(same_file(names[i]), "%s: the root's bytes", names[i]);

    const ino_t before = inode(g_copy, CKPT_STATE_FILE);
    CHECK(ckpt_spread_place(g_copy, pack, n, &err) == 0, "place again: %s", err.msg);
    CHECK(inode(g_copy, CKPT_STATE_FILE) == before, "a folder that holds the bytes: nothing rewritten");
    CHECK(ckpt_spread_place(g_root, pack, n, &err) == 0 && inode(g_root, CKPT_STATE_FILE) != 0,
          "into the root's own folder (a shared filesystem): %s", err.msg);

    put(g_copy, CKPT_STATE_FILE, "{\"step\": 2}");
    CHECK(ckpt_spread_place(g_copy, pack, n, &err) == 0 && same_file(CKPT_STATE_FILE), "a stale copy is replaced");

    char empty[100];
    snprintf(empty, sizeof empty, "%s/empty", g_root);
    CHECK(file_make_dirs(empty, &err) == 0, "empty folder: %s", err.msg);
    const size_t cuts[] = {0, 5, strlen(CKPT_INDEX_FILE) + 1, strlen(CKPT_INDEX_FILE) + 3, n / 2, n - 1};
    for (int i = 0; i < 6; i++) {
        err.msg[0] = '\0';
        CHECK(ckpt_spread_place(empty, pack, cuts[i], &err) == -1 && strstr(err.msg, "arrived malformed"),
              "a pack cut at %zu bytes: refused: %s", cuts[i], err.msg);
    }
    char *bad = malloc(n + 1);
    memcpy(bad, pack, n + 1);
    bad[0] = 'X';
    CHECK(ckpt_spread_place(empty, bad, n, &err) == -1 && strstr(err.msg, CKPT_INDEX_FILE), "a misnamed file: %s",
          err.msg);
    const char past[] = CKPT_INDEX_FILE "\n99999\n{}";   // its length runs past the pack
    CHECK(ckpt_spread_place(empty, past, sizeof past - 1, &err) == -1 && strstr(err.msg, "arrived malformed"),
          "a length past the end: %s", err.msg);
    CHECK(folder_is_empty(empty), "a refused pack writes nothing");
    free(bad);
    free(pack);
    identity_files_travel();

    char cmd[120];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_root);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", g_root);
    return test_finish();
}
