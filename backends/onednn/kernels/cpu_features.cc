// Feature detection with cpuid and xgetbv. __builtin_cpu_supports is not used:
// older GCCs report AVX-512 from cpuid alone, without asking whether the OS
// enabled the ZMM state, and a wrong answer here means SIGILL later.
#include "kernels/cpu_features.h"

#include <cpuid.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <utility>

#include "duet/error.h"

namespace duet::onednn {
namespace {

struct Features {
  bool avx2 = false;
  bool fma = false;
  bool f16c = false;
  bool avx_vnni = false;
  bool avx512f = false;
  bool avx512bw = false;
  bool avx512vl = false;
  bool avx512_vnni = false;
  bool amx_int8 = false;  // AMX-TILE and AMX-INT8, their state enabled in XCR0
  // AMX-TILE and AMX-BF16, their state enabled in XCR0, with the AVX-512
  // BF16 and VBMI instructions that row_tiles_amx_bf16.h's packing uses.
  bool amx_bf16 = false;
  // AVX-512 whose 512-bit operations run as two halves on 256-bit units
  // (AMD family 0x19, Zen 4): not a cpuid bit, the family's known design.
  bool avx512_split = false;
};

struct CpuidRegs {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
};

CpuidRegs cpuid(unsigned leaf, unsigned subleaf) {
  CpuidRegs r;
  if (__get_cpuid_count(leaf, subleaf, &r.eax, &r.ebx, &r.ecx, &r.edx) == 0) return CpuidRegs{};
  return r;
}

bool bit(unsigned reg, int n) { return ((reg >> n) & 1u) != 0; }

// Whether cpuid's vendor is AMD and its family (with the extended family
// added, as AMD defines it) is 0x19: Zen 3 and Zen 4, of which only Zen 4
// has AVX-512.
bool amd_family_19h(const CpuidRegs& leaf1) {
  const CpuidRegs l0 = cpuid(0, 0);
  constexpr unsigned kAuth = 0x68747541, kEnti = 0x69746e65, kCamd = 0x444d4163;  // "AuthenticAMD"
  if (l0.ebx != kAuth || l0.edx != kEnti || l0.ecx != kCamd) return false;
  const unsigned base = (leaf1.eax >> 8) & 0xfu;
  const unsigned family = base == 0xfu ? base + ((leaf1.eax >> 20) & 0xffu) : base;
  return family == 0x19;
}

// XCR0: which register states the OS saves. Encoded as bytes so no -mxsave is
// needed; only called after cpuid reported OSXSAVE, so the instruction exists.
uint64_t read_xcr0() {
  uint32_t lo = 0, hi = 0;
  __asm__ volatile(".byte 0x0f, 0x01, 0xd0" : "=a"(lo), "=d"(hi) : "c"(0));
  return (static_cast<uint64_t>(hi) << 32) | lo;
}

Features probe() {
  Features f;
  const CpuidRegs l1 = cpuid(1, 0);
  const bool osxsave = bit(l1.ecx, 27);
  const bool avx = bit(l1.ecx, 28);
  if (!osxsave || !avx) return f;
  const uint64_t xcr0 = read_xcr0();
  constexpr uint64_t kYmmState = 0x6;   // SSE and AVX upper halves
  constexpr uint64_t kZmmState = 0xe0;  // opmask, ZMM0-15 upper halves, ZMM16-31
  if ((xcr0 & kYmmState) != kYmmState) return f;
  const bool zmm_os = (xcr0 & kZmmState) == kZmmState;

  const CpuidRegs l7 = cpuid(7, 0);
  const CpuidRegs l7s1 = l7.eax >= 1 ? cpuid(7, 1) : CpuidRegs{};
  f.fma = bit(l1.ecx, 12);
  f.f16c = bit(l1.ecx, 29);
  f.avx2 = bit(l7.ebx, 5);
  f.avx_vnni = bit(l7s1.eax, 4);
  f.avx512f = zmm_os && bit(l7.ebx, 16);
  f.avx512bw = zmm_os && bit(l7.ebx, 30);
  f.avx512vl = zmm_os && bit(l7.ebx, 31);
  f.avx512_vnni = zmm_os && bit(l7.ecx, 11);
  constexpr uint64_t kTileState = 0x60000;  // XTILECFG and XTILEDATA
  const bool tiles = (xcr0 & kTileState) == kTileState && bit(l7.edx, 24);
  f.amx_int8 = tiles && bit(l7.edx, 25);
  f.amx_bf16 = tiles && bit(l7.edx, 22) && f.avx512bw && bit(l7s1.eax, 5) && bit(l7.ecx, 1);
  f.avx512_split = f.avx512f && amd_family_19h(l1);
  return f;
}

const Features& features() {
  static const Features f = probe();
  return f;
}

// Linux hands out the 8 KiB tile state only to processes that ask
// (arch_prctl ARCH_REQ_XCOMP_PERM, kernel 5.16 and later); the grant covers
// every thread of the process, present and future.
bool request_tile_state() {
#if defined(__linux__) && defined(SYS_arch_prctl)
  constexpr long kArchReqXcompPerm = 0x1023;
  constexpr long kXfeatureXtiledata = 18;
  return syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata) == 0;
#else
  return false;
#endif
}

constexpr CpuPath kAllPaths[] = {CpuPath::kScalar, CpuPath::kAvx2, CpuPath::kAvx512,
                                 CpuPath::kAvx512Vnni};

}  // namespace

CpuPath hardware_cpu_path() {
  const Features& f = features();
  if (!(f.avx2 && f.fma && f.f16c)) return CpuPath::kScalar;
  if (!(f.avx512f && f.avx512bw && f.avx512vl)) return CpuPath::kAvx2;
  return f.avx512_vnni ? CpuPath::kAvx512Vnni : CpuPath::kAvx512;
}

bool amx_int8_present() { return features().amx_int8; }

bool amx_int8_usable() {
  static const bool usable = features().amx_int8 && request_tile_state();
  return usable;
}

bool amx_bf16_present() { return features().amx_bf16; }

bool amx_bf16_usable() {
  static const bool usable = features().amx_bf16 && request_tile_state();
  return usable;
}

bool avx512_split_units() { return features().avx512_split; }

CpuPath detect_cpu_path() {
  const CpuPath hw = hardware_cpu_path();
  const char* env = std::getenv("DUET_CPU_PATH");
  if (env == nullptr || *env == '\0') return hw;
  for (CpuPath p : kAllPaths) {
    if (std::string_view(env) == cpu_path_name(p)) return p < hw ? p : hw;
  }
  throw Error(ErrorKind::kConfig, "DUET_CPU_PATH='" + std::string(env) +
                                      "' is not a CPU path; use scalar, avx2, avx512 or "
                                      "avx512_vnni (or unset it for the fastest)");
}

const char* cpu_path_name(CpuPath path) {
  switch (path) {
    case CpuPath::kScalar:
      return "scalar";
    case CpuPath::kAvx2:
      return "avx2";
    case CpuPath::kAvx512:
      return "avx512";
    case CpuPath::kAvx512Vnni:
      return "avx512_vnni";
  }
  return "unknown";
}

std::string cpu_features_summary() {
  const Features& f = features();
  const std::pair<bool, const char*> named[] = {{f.avx2, "avx2"},
                                                {f.fma, "fma"},
                                                {f.f16c, "f16c"},
                                                {f.avx_vnni, "avx_vnni"},
                                                {f.avx512f, "avx512f"},
                                                {f.avx512bw, "avx512bw"},
                                                {f.avx512vl, "avx512vl"},
                                                {f.avx512_vnni, "avx512_vnni"},
                                                {f.amx_int8, "amx_int8"},
                                                {f.amx_bf16, "amx_bf16"},
                                                {f.avx512_split, "avx512_split"}};
  std::string out;
  for (const auto& [present, name] : named) {
    if (!present) continue;
    if (!out.empty()) out += ' ';
    out += name;
  }
  return out.empty() ? "none" : out;
}

}  // namespace duet::onednn
