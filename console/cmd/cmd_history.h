#ifndef PPTRAIN_CMD_HISTORY_H
#define PPTRAIN_CMD_HISTORY_H

// `pptrain history [list|show RUN|compare A B ...|export RUN|schema] [options]`: reads the run
// store (never creates or changes it; a store from an older pptrain is upgraded in place) and
// prints runs as tables, sparklines, CSV or JSON. argv[1] is "history". Returns the process
// exit code (0, or 2 for bad input, a missing or foreign store, an unknown run).
int cmd_history(int argc, char **argv);
#endif
