// `pptrain export RUN|latest|CKPT_DIR FOLDER [--bf16] [--db FILE]`: the newest intact checkpoint
// of a run (or a checkpoint folder) as a plain Hugging Face folder (storage/hf_export).
#include "console/cmd/cmd_export.h"

#include <stdio.h>
#include <string.h>

#include "console/cli.h"
#include "console/cli_options.h"
#include "storage/checkpoint_find.h"
#include "storage/db.h"
#include "storage/hf_export.h"

typedef struct {
    const char *db_file;
    bool bf16, help;
} ExportOptions;

CLI_SWITCH_SETTER(set_bf16, ExportOptions, bf16)
CLI_TEXT_SETTER(set_db, ExportOptions, db_file)
CLI_SWITCH_SETTER(set_help, ExportOptions, help)
static const CliOption OPTIONS[] = {
    {"--bf16", NULL, "weights as bfloat16 (rounded to nearest even); default float32", set_bf16, 0},
    {"--db", "FILE", "the run store (pptrain.db)", set_db, 0},
    {"--help", NULL, "this help", set_help, 0},
};
#define N_OPTIONS ((int)(sizeof OPTIONS / sizeof OPTIONS[0]))

static void usage(FILE *out) {
    fprintf(out, "usage: pptrain export RUN|latest|CKPT_DIR FOLDER [--bf16] [--db FILE]\n\n"
                 "  Writes FOLDER/model.safetensors and FOLDER/config.json: a Hugging Face LlamaForCausalLM\n"
                 "  folder (transformers: LlamaForCausalLM.from_pretrained(FOLDER)), with the checkpoint's\n"
                 "  generation_config.json and tokenizer files where it has them. FOLDER must be new or\n"
                 "  empty: a folder that holds anything is refused, and nothing is written.\n"
                 "  RUN is a run id in the store (its newest intact checkpoint), latest the newest run\n"
                 "  with one, CKPT_DIR a checkpoint folder.\n\n");
    cli_options_usage(out, OPTIONS, N_OPTIONS, 12, NULL, NULL);
}

// The two words export takes: what to export, then where.
typedef struct {
    const char *what, *folder;
} ExportArgs;

static int take_word(void *ctx, const char *arg, Error *err) {
    ExportArgs *a = ctx;
    if (!a->what) a->what = arg;
    else if (!a->folder) a->folder = arg;
    else {
        error_set(err, "export: unexpected argument '%s'", arg);
        return -1;
    }
    return 0;
}

static bool help_asked(const void *o) { return ((const ExportOptions *)o)->help; }

static const CliCommand COMMAND = {"export", OPTIONS, N_OPTIONS, true, "--", take_word, help_asked};

int cmd_export(int argc, char **argv) {
    ExportOptions o = {.db_file = DB_DEFAULT_PATH};
    ExportArgs words = {NULL, NULL};
    Error err = {{0}};
    if (cli_options_parse(&COMMAND, argc, argv, 2, &o, &words, &err)) return cli_fail(&err);
    if (o.help) {
        usage(stdout);
        return 0;
    }
    const int refused = cli_refuse_mpirun_copies("export", NULL);
    if (refused) return refused;
    const char *what = words.what, *folder = words.folder;
    const char *db_file = o.db_file;
    const bool bf16 = o.bf16;
    if (!folder) {
        error_set(&err, "export needs RUN|latest|CKPT_DIR and FOLDER (see pptrain export --help)");
        return cli_fail(&err);
    }
    // FOLDER first: a folder that would be refused is refused before any checkpoint is read.
    if (hf_export_folder_check(folder, &err)) return cli_fail(&err);
    char dir[4096];
    int64_t run = 0;
    Error warning, fell_back;
    if (ckpt_find_resume(what, db_file, true, dir, sizeof dir, &run, &warning, &fell_back, &err)) return cli_fail(&err);
    if (warning.msg[0]) fprintf(stderr, "pptrain: warning: %s\n", warning.msg);
    if (fell_back.msg[0]) fprintf(stderr, "pptrain: note: %s; exporting %s\n", fell_back.msg, dir);
    HfExportInfo info;
    const int rc = hf_export(dir, folder, bf16, &info, &err);
    if (info.note[0]) fprintf(stderr, "pptrain: warning: %s\n", info.note);
    if (rc) return cli_fail(&err);
    printf("exported %s: %d tensors, %.3f M parameters, %s, %.2f MiB -> %s/model.safetensors + config.json", dir,
           info.tensors, info.params / 1e6, bf16 ? "bf16" : "f32", info.bytes / 1048576.0, folder);
    if (info.identity_files) printf(" + %d generation/tokenizer files", info.identity_files);
    printf("\n");
    return 0;
}
