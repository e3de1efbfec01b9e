// duet/host_device.h and duet/byte_size.h: the host-memory device the CPU
// backends share, in both allocation modes, and the one byte formatter.
#include "duet/host_device.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "duet/byte_size.h"
#include "duet/error.h"

namespace duet {
namespace {

TEST(FormatBytes, PicksTheLargestUnitWithOneDecimal) {
  EXPECT_EQ(format_bytes(0), "0 B");
  EXPECT_EQ(format_bytes(1023), "1023 B");
  EXPECT_EQ(format_bytes(1024), "1.0 KiB");
  EXPECT_EQ(format_bytes(1536), "1.5 KiB");
  EXPECT_EQ(format_bytes(98'340'864), "93.8 MiB");
  EXPECT_EQ(format_bytes(uint64_t{12} << 30), "12.0 GiB");
  EXPECT_EQ(format_bytes(uint64_t{1} << 62), "4.0 EiB");
  EXPECT_EQ(format_bytes(UINT64_MAX), "16.0 EiB");
}

class HostDeviceTest : public testing::TestWithParam<HostMemory> {
 protected:
  HostDevice device_{"test", GetParam()};
};

TEST_P(HostDeviceTest, AllocatesAlignedHostMemoryAndCopies) {
  EXPECT_EQ(device_.name(), "cpu");
  EXPECT_TRUE(device_.host_accessible());
  const MemoryInfo m = device_.memory();
  EXPECT_GT(m.total_bytes, 0u);
  EXPECT_LE(m.free_bytes, m.total_bytes);

  auto buf = device_.allocate(1000);
  EXPECT_EQ(buf->size(), 1000u);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(buf->data()) % 64, 0u);
  const std::vector<uint8_t> src(1000, 0xAB);
  std::vector<uint8_t> back(1000);
  device_.copy_from_host(buf->data(), src.data(), 1000);
  auto other = device_.allocate(1000);
  device_.copy_on_device(other->data(), buf->data(), 1000);
  device_.synchronize();
  device_.copy_to_host(back.data(), other->data(), 1000);
  EXPECT_EQ(back, src);

  auto empty = device_.allocate(0);
  auto empty2 = device_.allocate(0);
  EXPECT_EQ(empty->size(), 0u);
  EXPECT_NE(empty->data(), nullptr);
  EXPECT_NE(empty->data(), empty2->data());
}

TEST_P(HostDeviceTest, AnAbsurdAllocationIsOutOfMemoryNamingSizeBackendAndFix) {
  try {
    device_.allocate(uint64_t{1} << 62);
    FAIL() << "a 4 EiB allocation succeeded";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kOutOfMemory);
    const std::string what = e.what();
    EXPECT_NE(what.find("backend 'test' cannot allocate 4611686018427387904 bytes (4.0 EiB)"),
              std::string::npos)
        << what;
    EXPECT_NE(what.find("available (MemAvailable in /proc/meminfo)"), std::string::npos) << what;
    EXPECT_NE(what.find("use a smaller model, KV cache or batch"), std::string::npos) << what;
  }
}

INSTANTIATE_TEST_SUITE_P(Modes, HostDeviceTest,
                         testing::Values(HostMemory::kHeap, HostMemory::kLazyPages),
                         [](const testing::TestParamInfo<HostMemory>& p) {
                           return p.param == HostMemory::kHeap ? "Heap" : "LazyPages";
                         });

}  // namespace
}  // namespace duet
