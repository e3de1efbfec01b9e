// kernels/cpu_features.h — which SIMD instruction set the CPU kernels may use.
//
// Every kernel exists once per CpuPath; a path is usable only when both the CPU
// reports its instructions (cpuid) and the OS saves their register state on a
// context switch (XCR0, read with xgetbv). Nothing here executes an instruction
// beyond cpuid and xgetbv, so it is safe on any x86-64 CPU.
#pragma once

#include <string>

namespace duet::onednn {

// Ordered: each path needs everything the one before it needs.
//   kScalar:     portable C++, any CPU.
//   kAvx2:       AVX2 + FMA + F16C (Haswell and later).
//   kAvx512:     kAvx2 + AVX-512 F, BW, VL (Skylake-SP and later).
//   kAvx512Vnni: kAvx512 + AVX512_VNNI (Cascade Lake, Ice Lake and later).
enum class CpuPath { kScalar, kAvx2, kAvx512, kAvx512Vnni };

// The fastest path that this CPU and OS support, ignoring DUET_CPU_PATH.
// Computed once; safe to call from any thread.
CpuPath hardware_cpu_path();

// hardware_cpu_path(), lowered to DUET_CPU_PATH when that environment variable
// names a slower path ("scalar", "avx2", "avx512", "avx512_vnni"); a name of a
// faster path than the hardware has leaves the hardware path, so the variable
// can never select an instruction the CPU lacks. Reads the environment on every
// call (callers pick a path once, at backend creation).
// Throws duet::Error(kConfig) when DUET_CPU_PATH is set to another name.
CpuPath detect_cpu_path();

// Whether the CPU has AMX-TILE and AMX-INT8 and the OS saves their state
// (XCR0). Asks nothing of the OS; for descriptions.
bool amx_int8_present();

// Whether the AMX-INT8 tile kernels (row_tiles_amx.h) may run:
// amx_int8_present() and Linux granted this process the tile state, which
// the first call requests — a process-wide, permanent grant (after it the
// kernel refuses alternate signal stacks too small for the tile state), so
// only code about to use AMX should call this. Computed once; safe to call
// from any thread. The AMX kernels also use AVX-512 VNNI's registers:
// callers use them only on the kAvx512Vnni path, which every AMX CPU has.
bool amx_int8_usable();

// The same for the AMX-BF16 tile kernel (row_tiles_amx_bf16.h), which also
// needs AVX-512 BF16 and VBMI (every CPU with AMX-BF16 so far has both):
// whether the CPU has them and the OS saves the tile state, and whether,
// besides, Linux granted this process that state (requested as above).
bool amx_bf16_present();
bool amx_bf16_usable();

// Whether the CPU has AVX-512 and runs its 512-bit operations as two halves on
// 256-bit units (AMD Zen 4, cpuid family 0x19): one 512-bit f32 FMA a cycle,
// half a CPU with two 512-bit units, so oneDNN's f32 GEMM no longer keeps up
// with the row tiles' byte products at any prompt size measured
// (BackendOptions' GEMM crossover). From the vendor and family: no cpuid bit
// says it. Zen 5's mobile parts, also split, are family 0x1A and not
// included (not measured).
bool avx512_split_units();
// "scalar", "avx2", "avx512", "avx512_vnni".
const char* cpu_path_name(CpuPath path);

// The usable features relevant to the kernels, space-separated, in a fixed
// order, e.g. "avx2 fma f16c avx_vnni avx512f avx512bw avx512vl avx512_vnni
// amx_int8 amx_bf16 avx512_split" (the last: avx512_split_units());
// a feature the CPU has but the OS does not enable is left out. For logs.
std::string cpu_features_summary();

}  // namespace duet::onednn
