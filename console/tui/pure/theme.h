// console/tui/pure/theme: console color themes, read from text files at run time (--theme NAME).
// No curses here: a style is a portable (fg, bg, attributes) triple that the drawing code
// turns into curses color pairs and attributes.
//
// File format (themes/README.md has the same text and the role list with their uses):
//
//     # comment; blank lines are ignored; so is text after '#'
//     title      = cyan bold
//     selected   = black on cyan
//     bar_busy   = 34 on default          # 256-color index
//     idle       = dim                     # colors may be left out: default
//
//   One "role = [fg] [on bg] [attribute...]" per line, words separated by spaces or tabs.
//   Roles and colors are case-insensitive.
//   Colors: default (the terminal's own), black, red, green, yellow, blue, magenta, cyan,
//     white, bright-black ... bright-white (also written bright_red or brightred), or an
//     index 0..255 (0..7 are the eight names, 8..15 their bright variants).
//   Attributes: bold, dim, reverse, underline.
//   Every role may be set once; a role the file leaves out keeps the built-in default
//   (dark) style, so a theme can override a few roles.
//
// Errors name the file and line: "themes/x.theme:7: unknown color 'purpel'". On any error
// the loader leaves the built-in default in *out, so the console can print the message and
// go on with it.
//
// NO_COLOR (https://no-color.org): when the variable is set and not empty the console
// calls theme_apply_no_color, which drops every color and gives each role the attributes
// that tell it apart without color (reverse for the selection, the key bar labels and
// timeline blocks, bold for titles, ...): those of themes/monochrome.theme. The theme's own
// attributes go too: they were chosen to go with its colors, and keeping them could make
// two roles look alike (a bold loss curve beside a bold moving average). Monochrome
// drawing also relies on distinct characters (the F B I W letters of timeline blocks, one
// fill character per utilization-bar part), which the drawing code chooses.
#ifndef PPTRAIN_THEME_H
#define PPTRAIN_THEME_H
#include <stdbool.h>
#include <stddef.h>

#include "engine/error.h"

// The order is the file's documented order (themes/README.md) and the drawing code's index.
typedef enum {
    THEME_BACKGROUND,   // cleared screen
    THEME_TEXT,         // ordinary text
    THEME_DIM,          // secondary text: units, hints, column headings
    THEME_TITLE,        // panel titles
    THEME_BORDER,       // panel boxes
    THEME_HEADER,       // the run header line(s)
    THEME_PROGRESS,     // filled part of the step/ETA progress bar
    THEME_BAR_BUSY,     // utilization bar: compute
    THEME_BAR_IDLE,     // utilization bar: waiting
    THEME_BAR_COMM,     // utilization bar: communication
    THEME_ACTION_F,     // timeline: forward
    THEME_ACTION_B,     // timeline: full backward
    THEME_ACTION_I,     // timeline: input-gradient backward
    THEME_ACTION_W,     // timeline: weight-gradient backward
    THEME_ACTION_COMM,  // timeline: send/receive
    THEME_IDLE,         // timeline: bubble
    THEME_LOSS,         // loss curve
    THEME_LOSS_EMA,     // its moving average
    THEME_LOSS_COMPARE, // the second run's curve in the history compare pane
    THEME_LOSS_VAL,     // validation loss (--val-data), over the training loss
    THEME_SELECTED,     // selected row, field or list item
    THEME_INPUT,        // a form field or filter being edited
    THEME_WARNING,
    THEME_ERROR,
    THEME_KEYBAR_KEY,   // "F1" in the key bar
    THEME_KEYBAR_LABEL, // "Help" in the key bar
    THEME_ROLE_COUNT
} ThemeRole;

// Color values: THEME_COLOR_DEFAULT, or 0..255 (curses numbering: 0..7 black, red, green,
// yellow, blue, magenta, cyan, white; 8..15 the bright variants).
#define THEME_COLOR_DEFAULT (-1)

enum {
    THEME_ATTR_BOLD = 1u << 0,
    THEME_ATTR_DIM = 1u << 1,
    THEME_ATTR_REVERSE = 1u << 2,
    THEME_ATTR_UNDERLINE = 1u << 3,
};

typedef struct {
    short fg, bg;    // THEME_COLOR_DEFAULT or 0..255
    unsigned attrs;  // THEME_ATTR_* bits
} ThemeStyle;

typedef struct {
    char name[64];                          // "dark", or the file's name without ".theme"
    ThemeStyle style[THEME_ROLE_COUNT];
    bool defined[THEME_ROLE_COUNT];         // set by the file (all true for the built-in)
} Theme;

// "bar_busy", "action_F", ...; NULL outside the enum.
const char *theme_role_name(ThemeRole role);

// The built-in theme, identical to themes/dark.theme (a test holds them equal).
void theme_default(Theme *out);

// Parses a theme from memory (len bytes; NUL bytes are an error, not an end). `source`
// names it in errors ("themes/x.theme"); `name` becomes out->name. 0, or -1 with *err.
int theme_parse(const char *text, size_t len, const char *source, const char *name, Theme *out, Error *err);

// Reads and parses a theme file; out->name is the file name without directory or ".theme".
int theme_load(const char *path, Theme *out, Error *err);

// Resolves --theme: a value with a '/' or ending in ".theme" is a path; any other value is
// a name, looked up as <themes_dir>/<name>.theme. Writes the path (path_size bytes) and
// returns 0; when the file does not exist, -1 with an error listing the themes in
// themes_dir ("theme 'purple' not found in themes (have: dark, high-contrast, ...)").
int theme_find(const char *name_or_path, const char *themes_dir, char *path, size_t path_size, Error *err);

// True when the NO_COLOR environment value (getenv("NO_COLOR")) asks for no color: set
// and not empty.
bool theme_no_color_requested(const char *no_color_env);

// Drops every color and sets each role's attributes to monochrome's (see above); keeps the
// name.
void theme_apply_no_color(Theme *t);
#endif
