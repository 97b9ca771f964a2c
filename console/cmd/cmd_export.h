#ifndef PPTRAIN_CMD_EXPORT_H
#define PPTRAIN_CMD_EXPORT_H
// `pptrain export RUN|CKPT FOLDER`: a plain Hugging Face folder from a checkpoint.
int cmd_export(int argc, char **argv);
#endif
