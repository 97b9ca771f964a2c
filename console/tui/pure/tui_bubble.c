// console/tui/pure/tui_bubble: the bubble's parts as text (see tui_bubble.h).
#include "console/tui/pure/tui_bubble.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

enum { N_PARTS = 4 };

void tui_bubble_tenths(const TuiBubble *b, long out[5]) {
    const double part[N_PARTS] = {b->ideal, b->imbalance, b->transfer, b->contention};
    bool finite = isfinite(b->measured);
    for (int i = 0; i < N_PARTS; i++) finite &= isfinite(part[i]);
    if (!finite) {   // not measured: nothing to round
        for (int i = 0; i < 5; i++) out[i] = 0;
        return;
    }
    out[0] = lround(1000.0 * b->measured);
    double rest[N_PARTS];
    long sum = 0;
    for (int i = 0; i < N_PARTS; i++) {
        const double t = 1000.0 * part[i];
        out[1 + i] = (long)floor(t);
        rest[i] = t - floor(t);
        sum += out[1 + i];
    }
    // The tenths still missing go to the largest remainders, one each; a gap larger than the
    // parts can absorb that way (they did not add up to the measured figure) to the largest part.
    long missing = out[0] - sum;
    for (; missing > 0 && missing <= N_PARTS; missing--) {
        int best = 0;
        for (int i = 1; i < N_PARTS; i++)
            if (rest[i] > rest[best]) best = i;
        out[1 + best]++;
        rest[best] = -1.0;
    }
    if (missing != 0) {
        int big = 0;
        for (int i = 1; i < N_PARTS; i++)
            if (labs(out[1 + i]) > labs(out[1 + big])) big = i;
        out[1 + big] += missing;
    }
}

void tui_fmt_tenths(long tenths, char *buf, size_t size) {
    snprintf(buf, size, "%s%ld.%ld", tenths < 0 ? "-" : "", labs(tenths) / 10, labs(tenths) % 10);
}

typedef struct {
    const char *ideal, *imbalance, *transfer, *contention;
} Labels;

static const Labels LONG_LABELS = {"ideal", "imbalance", "transfer", "contention"};
static const Labels SHORT_LABELS = {"ideal", "imbal", "xfer", "contn"};

static int with_parts(const long t[5], const Labels *l, char *buf, size_t size) {
    char v[5][24];
    for (int i = 0; i < 5; i++) tui_fmt_tenths(t[i], v[i], sizeof v[i]);
    return snprintf(buf, size, "bubble %s%% = %s %s + %s %s + %s %s + %s %s", v[0], v[1], l->ideal, v[2],
                    l->imbalance, v[3], l->transfer, v[4], l->contention);
}

int tui_bubble_text(const TuiBubble *b, int width, char *buf, size_t size) {
    long t[5];
    tui_bubble_tenths(b, t);
    char measured[24], ideal[24], cand[4][256];
    tui_fmt_tenths(t[0], measured, sizeof measured);
    tui_fmt_tenths(t[1], ideal, sizeof ideal);
    int len[4];
    len[0] = with_parts(t, &LONG_LABELS, cand[0], sizeof cand[0]);
    len[1] = with_parts(t, &SHORT_LABELS, cand[1], sizeof cand[1]);
    len[2] = snprintf(cand[2], sizeof cand[2], "bubble %s%% (%s ideal)", measured, ideal);
    len[3] = snprintf(cand[3], sizeof cand[3], "bubble %s%%", measured);
    for (int k = 0; k < 4; k++)
        if (len[k] <= width) return snprintf(buf, size, "%s", cand[k]);
    if (size) buf[0] = '\0';
    return 0;
}
