// TRIDENT_SIMD_CLONES: compile a hot loop three times (AVX-512, AVX2+FMA, baseline SSE2) and
// pick the widest the CPU supports, once, at load time.
//
// The build has no -march flag (binaries must run on any x86-64), so on their own the
// elementwise loops compile to 4-wide SSE2 without FMA. GCC function multiversioning
// (target_clones, dispatched by an ifunc resolver) gives 8- and 16-wide variants with no change
// to the callers. The OpenMP regions inside a cloned function are outlined and cloned with it,
// and inline helpers (exp_approx, max_of) are inlined into each clone and compiled for its ISA.
// Clones use FMA contraction, so results can differ from the baseline in the last bits; the
// kernel tests compare the variant the test machine picks with double references, within
// tolerances that hold for all three.
//
// Levels are the psABI ones: x86-64-v3 = AVX2 + FMA + BMI, x86-64-v4 = v3 + AVX-512 F/BW/CD/DQ/VL.
// Elsewhere (not GCC, not x86-64 ELF) the macro is empty and the code is compiled once. A build
// may define it itself to test one variant on a CPU that would pick another:
// CMAKE_CXX_FLAGS=-DTRIDENT_SIMD_CLONES= tests the baseline SSE2 code on an AVX-512 machine.
// Not under ThreadSanitizer (the CUDA emulation's race checker): it instruments the ifunc
// resolver, which the loader runs before the sanitizer's runtime exists, and the program
// crashes before main.
#pragma once

#if defined(TRIDENT_SIMD_CLONES)
// Defined by the build: keep it.
#elif defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && defined(__ELF__) && \
    !defined(__SANITIZE_THREAD__)
#define TRIDENT_SIMD_CLONES \
  __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define TRIDENT_SIMD_CLONES
#endif
