// console/tui/pure/tui_bubble: the measured bubble and its parts (engine/telemetry.h BubbleParts) as
// text, for the live screen, `pptrain watch` and `pptrain history`. Pure: no curses.
//
// The parts are printed in points with one decimal, rounded so that they add up exactly to
// the measured figure as printed (largest remainder): a reader who sums them gets the number
// on its left.
#ifndef PPTRAIN_TUI_BUBBLE_H
#define PPTRAIN_TUI_BUBBLE_H
#include <stdbool.h>
#include <stddef.h>

typedef struct {
    double measured;                               // fraction of ranks x step time
    double ideal, imbalance, transfer, contention; // fractions adding up to measured
} TuiBubble;

// Tenths of a point: out[0] the measured figure, out[1..4] ideal, imbalance, transfer and
// contention, with out[1] + .. + out[4] == out[0]; all 0 when a figure is not finite.
void tui_bubble_tenths(const TuiBubble *b, long out[5]);

// The richest form that fits in width columns (ASCII, one byte per column), from
//   "bubble 56.2% = 27.3 ideal + 9.9 imbalance + 0.4 transfer + 18.6 contention"
// through shorter labels (imbal, xfer, contn) down to "bubble 56.2%"; "" when even that does
// not fit. Returns the length. The fourth part is "contention" on every screen, in `history
// show` and `compare` and in the store (bubble_contention); CPU oversubscription, its likeliest
// cause on a CPU, is named where the host's load is shown ("4 ranks on 2 cores").
int tui_bubble_text(const TuiBubble *b, int width, char *buf, size_t size);

// "-0.4", "27.3": tenths of a point as text.
void tui_fmt_tenths(long tenths, char *buf, size_t size);
#endif
