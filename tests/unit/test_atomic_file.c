// tests/unit/test_atomic_file.c: the tests of storage/atomic_file.
// storage/atomic_file: "nothing lost" under injected failures. Through the test-only syscall
// hooks: short writes and EINTR (must still produce the whole file), ENOSPC at every kind of
// offset, a failing fsync, a failing rename, and a process killed before the rename. After each
// one the target is the old complete file or the new complete file, never a mix; no temporary
// file is left (a killed writer's is removed by atomic_file_clean_stale); the error names the
// file and the step that failed. A file that cannot be created is named by the user's path,
// never the temporary name, with its missing folder. The safetensors and trace writers go
// through the same path.
#include <dirent.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "storage/atomic_file.h"
#include "storage/safetensors.h"
#include "storage/trace.h"
#include "test_util.h"

static char g_dir[64], g_target[128];

// ---- injected system calls ----------------------------------------------------------------------
static long g_budget = -1;   // bytes writable before ENOSPC (-1: unlimited)
static size_t g_max_chunk;   // a write moves at most this many bytes (0: no limit)
static int g_eintr;          // the next g_eintr writes fail with EINTR
static int g_fsync_errno, g_rename_errno;

static ssize_t fake_write(int fd, const void *buf, size_t n) {
    if (g_eintr > 0) {
        g_eintr--;
        errno = EINTR;
        return -1;
    }
    if (g_max_chunk && n > g_max_chunk) n = g_max_chunk;
    if (g_budget >= 0 && (long)n > g_budget) n = (size_t)g_budget;
    if (n == 0) {
        errno = ENOSPC;
        return -1;
    }
    const ssize_t w = write(fd, buf, n);
    if (w > 0 && g_budget >= 0) g_budget -= w;
    return w;
}

static int fake_fsync(int fd) {
    if (g_fsync_errno) return errno = g_fsync_errno, -1;
    return fsync(fd);
}

static int fake_rename(const char *from, const char *to) {
    if (g_rename_errno) return errno = g_rename_errno, -1;
    return rename(from, to);
}

static void inject(long budget, size_t max_chunk, int eintr, int fsync_errno, int rename_errno) {
    g_budget = budget, g_max_chunk = max_chunk, g_eintr = eintr;
    g_fsync_errno = fsync_errno, g_rename_errno = rename_errno;
    const AtomicFileSyscalls calls = {fake_write, fake_fsync, fake_rename};
    atomic_file_set_syscalls(&calls);
}

// ---- helpers --------------------------------------------------------------------------------------
enum { NEW_BYTES = 200000 };   // over the append buffer: buffered and direct writes both happen
static const char OLD[] = "the old, complete file\n";
static unsigned char g_new[NEW_BYTES];

static int count_temps(void) {
    DIR *d = opendir(g_dir);
    int n = 0;
    const struct dirent *e;
    while (d && (e = readdir(d))) n += atomic_file_is_temp(e->d_name);
    if (d) closedir(d);
    return n;
}

// 1 when path holds exactly data[0..n).
static int holds(const char *path, const void *data, size_t n) {
    Error err;
    int64_t bytes = 0;
    char got[65], want[65];
    if (file_sha256(path, got, &bytes, &err)) return 0;
    buffer_sha256(data, n, want);
    return bytes == (int64_t)n && strcmp(got, want) == 0;
}

static void reset_target(void) {
    atomic_file_set_syscalls(NULL);
    Error err;
    CHECK(atomic_write_file(g_target, OLD, sizeof OLD - 1, &err) == 0, "write the old file: %s", err.msg);
}

// Writes g_new in uneven appends (7 bytes, then the rest in two parts) and commits.
static int write_new(Error *err) {
    AtomicFile *af = atomic_file_open(g_target, err);
    if (!af) return -1;
    const size_t cuts[] = {0, 7, 70000, NEW_BYTES};
    for (int i = 0; i < 3; i++)
        if (atomic_file_append(af, g_new + cuts[i], cuts[i + 1] - cuts[i], err)) {
            atomic_file_abort(af);
            return -1;
        }
    return atomic_file_commit(af, err);
}

// After a failure: the old file intact, no temporary file, the error names the file and cause.
static void expect_failed(const char *what, int rc, const Error *err, const char *cause) {
    CHECK(rc == -1, "%s: reported as a failure", what);
    CHECK(holds(g_target, OLD, sizeof OLD - 1), "%s: the target is still the old complete file", what);
    CHECK(count_temps() == 0, "%s: no temporary file left, %d found", what, count_temps());
    CHECK(strstr(err->msg, g_target) && strstr(err->msg, cause), "%s: error names file and '%s': %s", what, cause,
          err->msg);
}

// ---- cases ----------------------------------------------------------------------------------------
static void test_short_writes_and_eintr(void) {
    reset_target();
    inject(-1, 7, 3, 0, 0);   // 7 bytes per write, three EINTRs first
    Error err = {{0}};
    CHECK(write_new(&err) == 0, "short writes: commit succeeds: %s", err.msg);
    CHECK(holds(g_target, g_new, NEW_BYTES), "short writes: the new complete file");
    CHECK(count_temps() == 0, "short writes: no temporary file");
}

// ENOSPC after k bytes, for k at the edges of the buffer, of each append and of the file.
static void test_enospc_everywhere(void) {
    const long ks[] = {0, 1, 7, 8, 65535, 65536, 65537, 70007, NEW_BYTES - 1};
    for (size_t i = 0; i < sizeof ks / sizeof ks[0]; i++) {
        reset_target();
        inject(ks[i], 0, 0, 0, 0);
        Error err = {{0}};
        char what[64];
        snprintf(what, sizeof what, "ENOSPC after %ld bytes", ks[i]);
        expect_failed(what, write_new(&err), &err, "No space left on device");
    }
    reset_target();
    inject(10, 0, 0, 0, 0);
    Error err = {{0}};
    expect_failed("atomic_write_file with ENOSPC", atomic_write_file(g_target, g_new, NEW_BYTES, &err), &err,
                  "write failed");
}

static void test_fsync_and_rename_fail(void) {
    reset_target();
    inject(-1, 0, 0, EIO, 0);
    Error err = {{0}};
    expect_failed("fsync fails", write_new(&err), &err, "fsync failed");
    reset_target();
    inject(-1, 0, 0, 0, EIO);
    expect_failed("rename fails", write_new(&err), &err, "rename failed");
}

static void test_abort(void) {
    reset_target();
    Error err = {{0}};
    AtomicFile *af = atomic_file_open(g_target, &err);
    CHECK(af && atomic_file_append(af, g_new, 1000, &err) == 0, "open and append: %s", err.msg);
    CHECK(count_temps() == 1, "while writing: one temporary file");
    atomic_file_abort(af);
    CHECK(holds(g_target, OLD, sizeof OLD - 1) && count_temps() == 0, "abort: old file, no temporary file");
}

// The user never sees "<path>.<pid>.tmp": an open that fails names the path and its missing folder.
static void test_open_names_the_target(void) {
    char path[256], want[512];
    snprintf(path, sizeof path, "%s/no/such/folder/x.csv", g_dir);
    snprintf(want, sizeof want,
             "%s: cannot write: No such file or directory (its folder %s/no/such/folder does not exist)", path, g_dir);
    Error err = {{0}};
    CHECK(atomic_write_file(path, "a", 1, &err) == -1, "missing folder: reported as a failure");
    CHECK(strcmp(err.msg, want) == 0 && !strstr(err.msg, ".tmp"), "missing folder: names the target: %s", err.msg);
    char st_path[256];
    snprintf(st_path, sizeof st_path, "%s/nothere/m.safetensors", g_dir);
    const int64_t shape[1] = {1};
    const float x[1] = {0};
    SafetensorsWriteTensor t = {"a", ST_F32, 1, shape, x};
    CHECK(safetensors_write(st_path, 1, &t, 0, NULL, &err) == -1 && strstr(err.msg, st_path) &&
              !strstr(err.msg, ".tmp") && strstr(err.msg, "does not exist"),
          "safetensors: names the target: %s", err.msg);
}

// A writer killed after most of the new bytes reached the disk, before the rename.
static void test_crash_before_rename(void) {
    reset_target();
    const pid_t child = fork();
    if (child == 0) {
        Error err;
        AtomicFile *af = atomic_file_open(g_target, &err);
        if (af && atomic_file_append(af, g_new, NEW_BYTES, &err) == 0) _exit(0);   // no commit: "killed"
        _exit(1);
    }
    int status = 0;
    waitpid(child, &status, 0);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "the child wrote its temporary file");
    CHECK(holds(g_target, OLD, sizeof OLD - 1), "crash before rename: the target is the old complete file");
    CHECK(count_temps() == 1, "crash before rename: its temporary file is there, %d", count_temps());
    // A live writer's temporary file (this process's parent is alive) is left alone.
    char live[200];
    snprintf(live, sizeof live, "%s/other.%ld.tmp", g_dir, (long)getppid());
    FILE *f = fopen(live, "w");
    if (f) fclose(f);
    CHECK(atomic_file_clean_stale(g_dir) == 1, "clean_stale removes the dead writer's file only");
    CHECK(count_temps() == 1 && access(live, F_OK) == 0, "the live writer's file stays");
    unlink(live);
    CHECK(holds(g_target, OLD, sizeof OLD - 1), "cleaning leaves the target alone");
}

// The hash taken as the bytes stream out equals the file's hash read back, whatever the
// appends' sizes (under, across and over the append buffer), with short writes underneath.
static void test_commit_hashed(void) {
    inject(-1, 4099, 0, 0, 0);
    const size_t cuts[] = {0, 1, 7, 65536, 65540, 70000, NEW_BYTES};
    AtomicFile *af = atomic_file_open(g_target, NULL);
    Error err = {{0}};
    for (int i = 0; af && i < 6; i++)
        CHECK(atomic_file_append(af, g_new + cuts[i], cuts[i + 1] - cuts[i], &err) == 0, "append %d", i);
    char streamed[65] = "", read_back[65] = "";
    int64_t bytes = -1, read_bytes = -2;
    CHECK(af && atomic_file_commit_hashed(af, streamed, &bytes, &err) == 0, "commit_hashed: %s", err.msg);
    CHECK(file_sha256(g_target, read_back, &read_bytes, &err) == 0, "hash read back: %s", err.msg);
    CHECK(strcmp(streamed, read_back) == 0 && bytes == read_bytes && bytes == NEW_BYTES,
          "streamed sha256 %s (%lld bytes) = read back %s (%lld)", streamed, (long long)bytes, read_back,
          (long long)read_bytes);
    char path[200];
    snprintf(path, sizeof path, "%s/h.safetensors", g_dir);
    const int64_t shape[1] = {NEW_BYTES / 4};
    const SafetensorsWriteTensor t = {"w", ST_F32, 1, shape, g_new};
    CHECK(safetensors_write_hashed(path, 1, &t, 0, NULL, streamed, &bytes, &err) == 0, "safetensors: %s", err.msg);
    CHECK(file_sha256(path, read_back, &read_bytes, &err) == 0 && strcmp(streamed, read_back) == 0 &&
          bytes == read_bytes, "safetensors: streamed sha256 = read back");
    unlink(path);
    atomic_file_set_syscalls(NULL);
}

// The two writers built on it: a full disk leaves nothing behind them either.
static void test_writers_on_it(void) {
    char st_path[200], tr_path[200];
    snprintf(st_path, sizeof st_path, "%s/x.safetensors", g_dir);
    snprintf(tr_path, sizeof tr_path, "%s/trace.json", g_dir);
    inject(100, 0, 0, 0, 0);
    const int64_t shape[1] = {NEW_BYTES / 4};
    const SafetensorsWriteTensor t = {"w", ST_F32, 1, shape, g_new};
    Error err = {{0}};
    CHECK(safetensors_write(st_path, 1, &t, 0, NULL, &err) == -1 && strstr(err.msg, "No space left"),
          "safetensors on a full disk: %s", err.msg);
    CHECK(access(st_path, F_OK) != 0 && count_temps() == 0, "safetensors: no file, no temporary file");
    inject(10, 0, 0, 0, 0);
    TraceWriter *tw = trace_open(tr_path, &err);
    CHECK(tw != NULL, "trace open: %s", err.msg);
    if (tw) CHECK(trace_close(tw, &err) == -1 && strstr(err.msg, "No space left"), "trace on a full disk: %s", err.msg);
    CHECK(access(tr_path, F_OK) != 0 && count_temps() == 0, "trace: no file, no temporary file");
    atomic_file_set_syscalls(NULL);
}

int main(void) {
    snprintf(g_dir, sizeof g_dir, "/tmp/pptrain_atomic_XXXXXX");
    if (!mkdtemp(g_dir)) return perror("mkdtemp"), 1;
    snprintf(g_target, sizeof g_target, "%s/target.bin", g_dir);
    for (size_t i = 0; i < NEW_BYTES; i++) g_new[i] = (unsigned char)(i * 2654435761u >> 24);
    test_short_writes_and_eintr();
    test_enospc_everywhere();
    test_fsync_and_rename_fail();
    test_abort();
    test_open_names_the_target();
    test_crash_before_rename();
    test_writers_on_it();
    test_commit_hashed();
    atomic_file_set_syscalls(NULL);
    unlink(g_target);
    CHECK(rmdir(g_dir) == 0, "the test folder is empty at the end");
    return test_finish();
}
