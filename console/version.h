// console/version: what `pptrain --version` prints: the version, how this program runs GPU
// stages (CUDA and NCCL it was built with, emulated, or none), and the libraries it runs on,
// as their own version calls report them (for bug reports).
#ifndef PPTRAIN_VERSION_H
#define PPTRAIN_VERSION_H
#include <stdio.h>

void version_print(FILE *out);
#endif
