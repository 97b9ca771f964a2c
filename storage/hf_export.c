#include "storage/hf_export.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "storage/atomic_file.h"
#include "storage/checkpoint.h"
#include "storage/model_identity.h"

int hf_export_folder_check(const char *out_dir, Error *err) {
    DIR *d = opendir(out_dir);
    if (!d) {
        if (errno == ENOENT) return 0;   // made by the export
        if (errno == ENOTDIR) error_set(err, "%s is a file, not a folder (export into a new or empty folder)", out_dir);
        else error_set(err, "%s: %s", out_dir, strerror(errno));
        return -1;
    }
    const struct dirent *e;
    while ((e = readdir(d)) && (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)) {}
    if (e) error_set(err, "%s/%s already exists (export into a new or empty folder)", out_dir, e->d_name);
    closedir(d);
    return e ? -1 : 0;
}

int hf_export(const char *src, const char *out_dir, bool bf16, HfExportInfo *info, Error *err) {
    HfExportInfo local;
    if (!info) info = &local;
    memset(info, 0, sizeof *info);
    char model_path[4200], config_path[4200];
    if (snprintf(model_path, sizeof model_path, "%s/model.safetensors", out_dir) >= (int)sizeof model_path ||
        snprintf(config_path, sizeof config_path, "%s/config.json", out_dir) >= (int)sizeof config_path) {
        error_set(err, "%.60s...: path too long", out_dir);
        return -1;
    }
    if (hf_export_folder_check(out_dir, err)) return -1;
    struct stat sb;
    Checkpoint *c = ckpt_open(src, false, CKPT_OPEN_VERIFY, err);
    if (!c) return -1;
    snprintf(info->note, sizeof info->note, "%.500s", ckpt_note(c));
    StageModel *sm = ckpt_load_model(c, err);
    int rc = sm ? 0 : -1;
    if (rc == 0) rc = file_make_dirs(out_dir, err);
    const CkptParamSet weights = {sm ? sm->weights : NULL, ""};
    if (rc == 0) rc = ckpt_write_params(model_path, sm, &weights, 1, bf16, NULL, NULL, err);
    if (rc == 0) {
        info->params = (int64_t)sm->numel;
        info->tensors = sm->n_params;
    }
    if (rc == 0) {
        // transformers reads torch_dtype to choose the dtype of the loaded model.
        char *config = model_config_to_hf_json(ckpt_model(c), bf16 ? "bfloat16" : "float32");
        rc = atomic_write_file(config_path, config, strlen(config), err);
        free(config);
    }
    CkptFile copied[IDENTITY_N_FILES];
    if (rc == 0) rc = identity_copy(src, out_dir, copied, &info->identity_files, err);
    if (rc == 0 && stat(model_path, &sb) == 0) info->bytes = (int64_t)sb.st_size;
    stage_free(sm);
    ckpt_close(c);
    return rc;
}
