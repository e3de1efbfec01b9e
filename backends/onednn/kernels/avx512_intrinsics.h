// kernels/avx512_intrinsics.h — <immintrin.h> for the AVX-512 sources.
//
// GCC 12's AVX-512 intrinsics build their "undefined" operands as
// `__m512 x = x`, which -Wuninitialized reports at every inlined use (GCC bug
// 105593, fixed in 13). The warnings are switched off for the including
// source file, which only the AVX-512 kernels are.
#pragma once

#if defined(__GNUC__) && !defined(__clang__) && __GNUC__ < 13
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <immintrin.h>
