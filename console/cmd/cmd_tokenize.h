#ifndef PPTRAIN_CMD_TOKENIZE_H
#define PPTRAIN_CMD_TOKENIZE_H
// `pptrain tokenize --tokenizer FILE --out DIR TEXT...`: text -> llm.c token shards.
int cmd_tokenize(int argc, char **argv);
#endif
