// Parameter initialization that depends only on (seed, global tensor name), never on how
// the layers are split across stages (DESIGN.md, "Parity"). The recipe is counter-based so
// any element can be computed alone, and tests/reference/ reproduces it in numpy:
//
//   mix(z)    = splitmix64 finalizer: z ^= z >> 30; z *= 0xBF58476D1CE4E5B9;
//               z ^= z >> 27; z *= 0x94D049BB133111EB; z ^= z >> 31   (uint64, wrapping)
//   key       = mix(fnv1a64(name) ^ mix(seed))
//   r(c)      = mix(key + (c + 1) * 0x9E3779B97F4A7C15)
//   u(c)      = ((r(c) >> 11) + 0.5) * 2^-53                            in (0, 1), double
//   element i: p = i / 2, rad = sqrt(-2 ln u(2p)), ang = 2 pi u(2p + 1),
//              normal = rad * (i even ? cos(ang) : sin(ang))            (Box-Muller, double)
//   value     = (float)(std * normal)
// fnv1a64: h = 0xCBF29CE484222325; for each byte: h ^= byte; h *= 0x100000001B3.
#ifndef PPTRAIN_INIT_H
#define PPTRAIN_INIT_H
#include <stddef.h>
#include <stdint.h>

uint64_t init_fnv1a64(const char *s);
uint64_t init_mix64(uint64_t z);
// Fills out[0..n) with N(0, std^2) values for the tensor called name.
void init_normal(float *out, size_t n, uint64_t seed, const char *name, float std);
#endif
