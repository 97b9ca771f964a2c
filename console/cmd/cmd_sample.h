#ifndef PPTRAIN_CMD_SAMPLE_H
#define PPTRAIN_CMD_SAMPLE_H
// `pptrain sample RUN|latest|DIR|HF-FOLDER --prompt TEXT`: text from a trained model, generated
// on the pipeline (console/cmd/cmd_sample.c).
int cmd_sample(int argc, char **argv);
#endif
