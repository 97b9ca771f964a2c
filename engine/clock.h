// engine/clock: the one monotonic clock every floor reads (step timings, action events,
// deadlines, the console's refresh): CLOCK_MONOTONIC in seconds. On one host all processes
// share it, which is what lines up the ranks' events (engine/telemetry.h).
#ifndef PPTRAIN_CLOCK_H
#define PPTRAIN_CLOCK_H

// Seconds since an arbitrary fixed point (boot), never going backwards.
double clock_now_s(void);
#endif
