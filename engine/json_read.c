// engine/json_read: cJSON's parser plus a refusal of duplicate keys (json_read.h says why).
#include "engine/json_read.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

static int compare_names(const void *a, const void *b) {
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

// The first key of obj that appears twice, or NULL. Sorting a copy of the names keeps this
// O(n log n): a safetensors header or an index's weight_map holds thousands of keys.
static const char *duplicate_key(const cJSON *obj) {
    size_t n = 0;
    for (const cJSON *c = obj->child; c; c = c->next) n++;
    if (n < 2) return NULL;
    const char **names = xcalloc(n, sizeof *names);
    size_t i = 0;
    for (const cJSON *c = obj->child; c; c = c->next) names[i++] = c->string ? c->string : "";
    qsort(names, n, sizeof *names, compare_names);
    const char *dup = NULL;
    for (i = 1; i < n && !dup; i++)
        if (strcmp(names[i - 1], names[i]) == 0) dup = names[i];
    free(names);
    return dup;
}

// Depth-first over objects and arrays; `where` names the object being walked ("" for the
// root), for the message. cJSON's own nesting limit (1000) bounds the recursion.
static int walk(const cJSON *node, const char *where, const char *path, Error *err) {
    if (cJSON_IsObject(node)) {
        const char *dup = duplicate_key(node);
        if (dup) {
            if (where[0]) error_set(err, "%s: duplicate key: \"%s\" twice in \"%s\" (Python's json takes the last "
                                         "one; pptrain refuses the file rather than read another value)", path, dup, where);
            else error_set(err, "%s: duplicate key: \"%s\" twice (Python's json takes the last one; pptrain refuses "
                                "the file rather than read another value)", path, dup);
            return -1;
        }
    }
    if (!cJSON_IsObject(node) && !cJSON_IsArray(node)) return 0;
    for (const cJSON *c = node->child; c; c = c->next)
        if (walk(c, cJSON_IsObject(node) && c->string ? c->string : where, path, err)) return -1;
    return 0;
}

int json_check_unique_keys(const cJSON *root, const char *path, Error *err) { return walk(root, "", path, err); }

cJSON *json_parse_object(const char *text, size_t len, const char *path, Error *err) {
    const char *end = NULL;
    cJSON *root = text ? cJSON_ParseWithLengthOpts(text, len, &end, 0) : NULL;
    bool trailing = false;
    for (const char *c = end; root && c < text + len && *c; c++)
        trailing |= *c != ' ' && *c != '\t' && *c != '\n' && *c != '\r';
    if (!root || trailing || !cJSON_IsObject(root)) {
        const size_t at = end && end >= text ? (size_t)(end - text) : 0;
        if (!root || trailing) error_set(err, "%s: not a JSON object (a syntax error near byte %zu)", path, at);
        else error_set(err, "%s: not a JSON object", path);
        cJSON_Delete(root);
        return NULL;
    }
    if (json_check_unique_keys(root, path, err)) {
        cJSON_Delete(root);
        return NULL;
    }
    return root;
}
