// Finds the files a --data path names. A folder is walked recursively and its files are
// returned in sorted path order (strcmp, so the order is the same under every locale).
// What a user pointing at a folder such as /usr/share/games/fortunes expects to be read:
//   - hidden entries (".git", ".DS_Store") are skipped, as are sockets, fifos and dangling links;
//   - a file reached twice (fortune's "riddles.u8 -> riddles" symlinks, hard links) is read
//     once, under the first path in sorted order; folder symlink loops are walked once;
//   - "NAME.dat" beside a file "NAME" is strfile(1)'s index of NAME, not text, and is skipped.
// Files that hold NUL bytes are left to data_text.c to skip, since it reads them anyway.
// A folder `pptrain tokenize` wrote is read as its tokenize.json lists it, not walked
// (data_list_source; the rules in engine/data/data.h).
#include "engine/data/data_source.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "engine/file_read.h"
#include "engine/json_read.h"

typedef struct {
    char *path;
    dev_t dev;
    ino_t ino;
    size_t order;   // position in sorted path order
} Found;

typedef struct {
    Found *file;
    size_t n, cap;
    struct { dev_t dev; ino_t ino; } *dir;   // folders already walked
    size_t n_dir, cap_dir;
} Walk;

int data_has_suffix(const char *s, const char *suffix) {
    size_t ns = strlen(s), nx = strlen(suffix);
    return ns >= nx && strcmp(s + ns - nx, suffix) == 0;
}

static char *join_path(const char *dir, const char *name) {
    size_t nd = strlen(dir), nn = strlen(name);
    while (nd > 1 && dir[nd - 1] == '/') nd--;
    char *p = xmalloc(nd + 1 + nn + 1);
    memcpy(p, dir, nd);
    p[nd] = '/';
    memcpy(p + nd + 1, name, nn + 1);
    return p;
}

static int cmp_str(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static int cmp_found_path(const void *a, const void *b) {
    return strcmp(((const Found *)a)->path, ((const Found *)b)->path);
}

static int cmp_found_inode(const void *a, const void *b) {
    const Found *x = a, *y = b;
    if (x->dev != y->dev) return x->dev < y->dev ? -1 : 1;
    if (x->ino != y->ino) return x->ino < y->ino ? -1 : 1;
    return x->order < y->order ? -1 : x->order > y->order;
}

static int is_strfile_index(const char *dir, const char *name) {
    if (!data_has_suffix(name, ".dat") || strlen(name) == 4) return 0;
    char *base = join_path(dir, name);
    base[strlen(base) - 4] = '\0';
    struct stat st;
    int found = stat(base, &st) == 0 && S_ISREG(st.st_mode);
    free(base);
    return found;
}

static int seen_dir(Walk *w, const struct stat *st) {
    for (size_t i = 0; i < w->n_dir; i++)
        if (w->dir[i].dev == st->st_dev && w->dir[i].ino == st->st_ino) return 1;
    if (w->n_dir == w->cap_dir) {
        w->cap_dir = w->cap_dir ? 2 * w->cap_dir : 16;
        w->dir = check_alloc(realloc(w->dir, w->cap_dir * sizeof *w->dir),
                             w->cap_dir * sizeof *w->dir, __FILE__, __LINE__);
    }
    w->dir[w->n_dir].dev = st->st_dev;
    w->dir[w->n_dir].ino = st->st_ino;
    w->n_dir++;
    return 0;
}

static void add_file(Walk *w, char *path, const struct stat *st) {
    if (w->n == w->cap) {
        w->cap = w->cap ? 2 * w->cap : 64;
        w->file = check_alloc(realloc(w->file, w->cap * sizeof *w->file),
                              w->cap * sizeof *w->file, __FILE__, __LINE__);
    }
    w->file[w->n++] = (Found){.path = path, .dev = st->st_dev, .ino = st->st_ino};
}

// Names in dir, hidden ones left out, sorted; NULL with err filled when dir cannot be read.
static char **list_dir(const char *dir, size_t *count, Error *err) {
    DIR *d = opendir(dir);
    if (!d) {
        error_set(err, "%s: cannot open folder: %s", dir, strerror(errno));
        return NULL;
    }
    char **names = NULL;
    size_t n = 0, cap = 0;
    for (struct dirent *e; (e = readdir(d));) {
        if (e->d_name[0] == '.') continue;
        if (n == cap) {
            cap = cap ? 2 * cap : 32;
            names = check_alloc(realloc(names, cap * sizeof *names), cap * sizeof *names,
                                __FILE__, __LINE__);
        }
        names[n++] = strdup(e->d_name);
        check_alloc(names[n - 1], 1, __FILE__, __LINE__);
    }
    closedir(d);
    if (n) qsort(names, n, sizeof *names, cmp_str);
    *count = n;
    return names ? names : xmalloc(1);
}

static int walk_dir(const char *dir, Walk *w, Error *err) {
    size_t n = 0;
    char **names = list_dir(dir, &n, err);
    if (!names) return -1;
    int rc = 0;
    for (size_t i = 0; i < n; i++) {
        char *path = join_path(dir, names[i]);
        struct stat st;
        int keep = 0;
        if (rc == 0 && stat(path, &st) == 0) {   // follows symlinks; a dangling one is skipped
            if (S_ISDIR(st.st_mode)) {
                if (!seen_dir(w, &st)) rc = walk_dir(path, w, err);
            } else if (S_ISREG(st.st_mode) && !is_strfile_index(dir, names[i])) {
                add_file(w, path, &st);
                keep = 1;
            }
        }
        if (!keep) free(path);
        free(names[i]);
    }
    free(names);
    return rc;
}

// Sorts by path and drops every later path to a file already listed.
static size_t sort_and_dedupe(Found *f, size_t n) {
    if (n == 0) return 0;
    qsort(f, n, sizeof *f, cmp_found_path);
    for (size_t i = 0; i < n; i++) f[i].order = i;
    qsort(f, n, sizeof *f, cmp_found_inode);
    for (size_t i = 1; i < n; i++)
        if (f[i].dev == f[i - 1].dev && f[i].ino == f[i - 1].ino) {
            free(f[i].path);
            f[i].path = NULL;
        }
    size_t kept = 0;
    for (size_t i = 0; i < n; i++)
        if (f[i].path) f[kept++] = f[i];
    qsort(f, kept, sizeof *f, cmp_found_path);
    return kept;
}

int data_list_files(const char *path, FileList *out, Error *err) {
    *out = (FileList){0};
    struct stat st;
    if (stat(path, &st) != 0) {
        error_set(err, "%s: cannot open: %s", path, strerror(errno));
        return -1;
    }
    if (!S_ISDIR(st.st_mode)) {
        if (!S_ISREG(st.st_mode)) {
            error_set(err, "%s: not a regular file or folder", path);
            return -1;
        }
        out->path = xmalloc(sizeof *out->path);
        out->path[0] = strdup(path);
        check_alloc(out->path[0], 1, __FILE__, __LINE__);
        out->n = 1;
        out->lone = 1;
        return 0;
    }
    Walk w = {0};
    seen_dir(&w, &st);
    int rc = walk_dir(path, &w, err);
    free(w.dir);
    size_t n = sort_and_dedupe(w.file, w.n);
    out->path = xmalloc((n ? n : 1) * sizeof *out->path);
    for (size_t i = 0; i < n; i++) out->path[i] = w.file[i].path;
    out->n = n;
    free(w.file);
    if (rc == 0 && n == 0) {
        error_set(err, "%s: empty folder (no visible files in it or below it)", path);
        rc = -1;
    }
    if (rc != 0) data_free_files(out);
    return rc;
}

void data_free_files(FileList *fl) {
    for (size_t i = 0; i < fl->n; i++) free(fl->path[i]);
    free(fl->path);
    *fl = (FileList){0};
}

int data_read_file(const char *path, unsigned char **buf, size_t *len, Error *err) {
    *buf = NULL;
    *len = 0;
    int fd = open(path, O_RDONLY);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0) {
        error_set(err, "%s: cannot read: %s", path, strerror(errno));
        if (fd >= 0) close(fd);
        return -1;
    }
    size_t size = (size_t)st.st_size, got = 0;
    unsigned char *p = size ? xmalloc(size) : NULL;
    while (got < size) {
        ssize_t r = read(fd, p + got, size - got);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) {
            error_set(err, "%s: read failed after %zu of %zu bytes: %s", path, got, size,
                      r < 0 ? strerror(errno) : "file shrank while reading");
            free(p);
            close(fd);
            return -1;
        }
        got += (size_t)r;
    }
    close(fd);
    *buf = p;
    *len = size;
    return 0;
}

// ---- a `pptrain tokenize` folder: the shards its manifest lists -----------------------------------

void data_free_shard_names(ShardNames *s) {
    for (size_t i = 0; i < s->n; i++) free(s->name[i]);
    free(s->name);
    *s = (ShardNames){0};
}

static int plain_file_name(const char *name) {
    return name && name[0] && strchr(name, '/') == NULL && strcmp(name, ".") != 0 && strcmp(name, "..") != 0;
}

int data_manifest_read(const char *dir, struct cJSON **json, char **path, Error *err) {
    *json = NULL;
    *path = join_path(dir, DATA_MANIFEST);
    struct stat st;
    int rc = 0;
    if (stat(dir, &st) == 0 && S_ISDIR(st.st_mode) && stat(*path, &st) == 0) {
        char *text = file_read_all(*path, DATA_MANIFEST_MAX_BYTES, "a " DATA_MANIFEST, NULL, err);
        *json = text ? json_parse_object(text, strlen(text), *path, err) : NULL;
        free(text);
        rc = *json ? 1 : -1;
    }
    if (rc != 1) {
        free(*path);
        *path = NULL;
    }
    return rc;
}

int data_manifest_shards(const char *dir, ShardNames *out, Error *err) {
    *out = (ShardNames){0};
    cJSON *j;
    char *path;
    int rc = data_manifest_read(dir, &j, &path, err);
    if (rc <= 0) return rc;
    const cJSON *shards = cJSON_GetObjectItemCaseSensitive(j, "shards");
    if (!cJSON_IsArray(shards)) {
        error_set(err, "%s: malformed (no \"shards\" list)", path);
        rc = -1;
    }
    if (rc == 1) {
        const int n = cJSON_GetArraySize(shards);
        out->name = xcalloc(n > 0 ? (size_t)n : 1, sizeof *out->name);
        const cJSON *f;
        cJSON_ArrayForEach(f, shards) {
            const char *name = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(f, "file"));
            if (!plain_file_name(name)) {
                error_set(err, "%s: malformed (shard %zu has no \"file\", or one that is not a file name)", path,
                          out->n + 1);
                rc = -1;
                break;
            }
            out->name[out->n] = strdup(name);
            check_alloc(out->name[out->n++], 1, __FILE__, __LINE__);
        }
    }
    cJSON_Delete(j);
    free(path);
    if (rc != 1) data_free_shard_names(out);
    return rc;
}

// The listed shards as paths under dir, sorted as a walk of the folder would list them.
static int manifest_files(const char *dir, const ShardNames *names, FileList *out, Error *err) {
    if (names->n == 0) {
        error_set(err, "%s/" DATA_MANIFEST " lists no shards (its tokenize found no documents)", dir);
        return -1;
    }
    out->path = xcalloc(names->n, sizeof *out->path);
    for (size_t i = 0; i < names->n; i++) {
        out->path[out->n++] = join_path(dir, names->name[i]);
        struct stat st;
        const int failed = stat(out->path[i], &st) != 0 ? errno : 0;
        char why[160] = "";
        if (failed == ENOENT) snprintf(why, sizeof why, "missing");
        else if (failed) snprintf(why, sizeof why, "not readable (%s)", strerror(failed));
        else if (!S_ISREG(st.st_mode)) snprintf(why, sizeof why, "not a file");
        if (why[0]) {
            error_set(err, "%s/" DATA_MANIFEST " lists %s, which is %s: run pptrain tokenize again", dir,
                      names->name[i], why);
            data_free_files(out);
            return -1;
        }
    }
    qsort(out->path, out->n, sizeof *out->path, cmp_str);
    for (size_t i = 1; i < out->n; i++)
        if (strcmp(out->path[i], out->path[i - 1]) == 0) {
            error_set(err, "%s/" DATA_MANIFEST " lists %s twice: run pptrain tokenize again", dir,
                      strrchr(out->path[i], '/') + 1);
            data_free_files(out);
            return -1;
        }
    return 0;
}

int data_list_source(const char *path, FileList *out, Error *err) {
    *out = (FileList){0};
    ShardNames names;
    const int listed = data_manifest_shards(path, &names, err);
    if (listed < 0) return -1;
    if (listed) {
        const int rc = manifest_files(path, &names, out, err);
        data_free_shard_names(&names);
        return rc;
    }
    char *staging = join_path(path, DATA_STAGING);
    struct stat st;
    const int unfinished = stat(path, &st) == 0 && S_ISDIR(st.st_mode) && stat(staging, &st) == 0;
    free(staging);
    if (unfinished) {
        error_set(err, "%s: a pptrain tokenize into this folder has not finished (it holds " DATA_STAGING
                  " and no " DATA_MANIFEST "): wait for it, or run it again", path);
        return -1;
    }
    if (data_list_files(path, out, err) != 0) return -1;
    size_t kept = 0;   // a manifest below the folder is not data either
    for (size_t i = 0; i < out->n; i++) {
        const char *name = strrchr(out->path[i], '/');
        if (!out->lone && strcmp(name ? name + 1 : out->path[i], DATA_MANIFEST) == 0) free(out->path[i]);
        else out->path[kept++] = out->path[i];
    }
    out->n = kept;
    return 0;
}
