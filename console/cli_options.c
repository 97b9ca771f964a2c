// console/cli_options: one parser step, one option loop and one usage printer for the
// commands' option tables (cli_options.h).
#include "console/cli_options.h"

#include <string.h>

#include "console/cli.h"

const CliOption *cli_option_find(const CliOption *rows, int n, const char *flag) {
    for (int k = 0; k < n; k++)
        if (strcmp(flag, rows[k].flag) == 0) return &rows[k];
    return NULL;
}

int cli_option_take(const CliOption *opt, int argc, char **argv, int *i, void *opts, Error *err) {
    const char *value = NULL;
    if (opt->arg && !(value = cli_value(argc, argv, i, err))) return -1;
    return opt->set(opts, opt->flag, value, err);
}

int cli_options_parse(const CliCommand *c, int argc, char **argv, int first, void *opts, void *ctx, Error *err) {
    for (int i = first; i < argc; i++) {
        const char *a = argv[i];
        const CliOption *opt = cli_option_find(c->rows, c->n, c->help_alias && !strcmp(a, "-h") ? "--help" : a);
        if (opt) {
            if (cli_option_take(opt, argc, argv, &i, opts, err)) return -1;
            if (c->stop && c->stop(opts)) return 0;
        } else if (!c->positional || strncmp(a, c->unknown_prefix, strlen(c->unknown_prefix)) == 0) {
            error_set(err, "%s: unknown option '%s' (see pptrain %s --help)", c->cmd, a, c->cmd);
            return -1;
        } else if (c->positional(ctx, a, err)) {
            return -1;
        }
    }
    return 0;
}

void cli_options_usage(FILE *out, const CliOption *rows, int n, int width, bool (*shown)(const CliOption *o),
                       CliOptionText text) {
    for (int k = 0; k < n; k++) {
        if (shown && !shown(&rows[k])) continue;
        char arg[128], help[512], head[192];
        snprintf(arg, sizeof arg, "%s", rows[k].arg ? rows[k].arg : "");
        snprintf(help, sizeof help, "%s", rows[k].help ? rows[k].help : "");
        if (text) text(&rows[k], arg, sizeof arg, help, sizeof help);
        snprintf(head, sizeof head, "%s%s%s", rows[k].flag, arg[0] ? " " : "", arg);
        fprintf(out, "  %-*s %s\n", width, head, help);
    }
}
