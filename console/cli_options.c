// console/cli_options: one parser step and one usage printer for the commands' option tables
// (cli_options.h).
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
