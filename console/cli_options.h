// console/cli_options: the option tables of every command (run options, plan, history), read
// by one parser and printed by one usage printer. A row is a flag, its value's name (NULL for a
// switch), its help line and the setter that writes it into the command's options struct;
// each command keeps its own rules (which flags a verb takes, what an unknown flag says).
#ifndef PPTRAIN_CLI_OPTIONS_H
#define PPTRAIN_CLI_OPTIONS_H
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "engine/error.h"

// Writes value (NULL for a switch) into opts, the command's options struct; -1 with err
// ("--flag: 'text' is not ...").
typedef int (*CliSetter)(void *opts, const char *flag, const char *value, Error *err);

typedef struct {
    const char *flag;    // "--stages"
    const char *arg;     // "P"; NULL: a switch, which takes no value
    const char *help;    // one line (a command may write it at print time: CliOptionText)
    CliSetter set;
    unsigned scope;      // where it applies, as the command counts (history: a mask of verbs); 0: everywhere
} CliOption;

// Setters for the two common rows, written once for every command: CLI_TEXT_SETTER(fn, Type,
// field) keeps the value as given in the const char * Type.field (argv outlives the parse);
// CLI_SWITCH_SETTER(fn, Type, field) sets the bool Type.field.
#define CLI_TEXT_SETTER(fn, Type, field)                                 \
    static int fn(void *o, const char *f, const char *v, Error *e) {     \
        (void)f, (void)e;                                                \
        ((Type *)o)->field = v;                                          \
        return 0;                                                        \
    }
#define CLI_SWITCH_SETTER(fn, Type, field)                               \
    static int fn(void *o, const char *f, const char *v, Error *e) {     \
        (void)f, (void)v, (void)e;                                       \
        ((Type *)o)->field = true;                                       \
        return 0;                                                        \
    }

// The row whose flag is flag; NULL when none is.
const CliOption *cli_option_find(const CliOption *rows, int n, const char *flag);
// Takes the option at argv[*i] into opts: its value from argv[*i + 1] when it has one (*i then
// moves past it), through its setter. 0, or -1 with err ("--flag needs a value", the setter's).
int cli_option_take(const CliOption *opt, int argc, char **argv, int *i, void *opts, Error *err);

// One command's option loop, shared by export, plan, tokenize and watch: argv[first..argc)
// read against rows into opts, each flag through cli_option_take ("-h" stands for "--help" where
// help_alias); an argument that starts with unknown_prefix and is no row is refused as
// "CMD: unknown option 'X' (see pptrain CMD --help)"; every other argument goes to
// positional(ctx, arg, err) (NULL: the command takes none, so every such argument is an
// unknown option). stop(opts), when given, ends the loop as soon as it holds (export: --help
// wins over what follows it). 0, or -1 with err.
typedef struct {
    const char *cmd;                  // "export", for the messages
    const CliOption *rows;
    int n;
    bool help_alias;                  // "-h" is "--help"
    const char *unknown_prefix;       // "--" (export, tokenize) or "-" (watch)
    int (*positional)(void *ctx, const char *arg, Error *err);
    bool (*stop)(const void *opts);
} CliCommand;
int cli_options_parse(const CliCommand *c, int argc, char **argv, int first, void *opts, void *ctx, Error *err);

// A row's value name and help line as printed, where a command generates them (from a registry).
typedef void (*CliOptionText)(const CliOption *o, char *arg, size_t arg_size, char *help, size_t help_size);
// "  --flag ARG<pad> help" for each row that shown accepts (NULL: every row), the flag and its
// value padded to width; text NULL prints the rows as written.
void cli_options_usage(FILE *out, const CliOption *rows, int n, int width, bool (*shown)(const CliOption *o),
                       CliOptionText text);
#endif
