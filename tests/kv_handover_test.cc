// The KV handover between backends' caches (core/src/kv/kv_handover.h): the
// receiving backend holds exactly the bytes its own write() stores for the
// values the sender held, for every pair of cache dtypes.
#include "kv/kv_handover.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

#include "duet/app/plugin_host.h"
#include "duet/plugin.h"
#include "duet/quant.h"
#include "random_floats.h"

namespace duet {
namespace {

namespace fs = std::filesystem;

constexpr int32_t kLayers = 2, kKvHeads = 3, kHeadDim = 64, kSlots = 40;
constexpr int64_t kRow = int64_t{kKvHeads} * kHeadDim;

KVCacheSpec spec_of(DType dtype) {
  return KVCacheSpec{"contiguous", kLayers, kKvHeads, kHeadDim, 64, 64, dtype};
}

// Writes `k` and `v` ([kSlots, kRow] floats per layer) into slots [0,
// kSlots) of every layer of `kv` through its own write(): the storage's own
// conversion.
void write_rows(KVCache& kv, const std::vector<float>& k, const std::vector<float>& v) {
  StepBatch step;
  step.n_tokens = kSlots;
  for (int32_t i = 0; i < kSlots; ++i) step.slot_mapping.push_back(i);
  for (int32_t l = 0; l < kLayers; ++l) {
    const size_t at = static_cast<size_t>(l) * kSlots * kRow;
    TensorView kt{const_cast<float*>(k.data() + at), DType::kF32, {kSlots, kKvHeads, kHeadDim}};
    TensorView vt{const_cast<float*>(v.data() + at), DType::kF32, {kSlots, kKvHeads, kHeadDim}};
    kv.write(l, step, kt, vt);
  }
}

// The f32 values of an export, split back into K and V rows per layer.
void values_of(const std::vector<uint8_t>& exported, DType dtype, std::vector<float>& k,
               std::vector<float>& v) {
  const std::vector<uint8_t> f32 = convert_kv_rows(exported, dtype, DType::kF32, kRow);
  const auto* all = reinterpret_cast<const float*>(f32.data());
  k.clear();
  v.clear();
  for (int32_t l = 0; l < kLayers; ++l) {
    const float* layer = all + static_cast<size_t>(l) * 2 * kSlots * kRow;
    k.insert(k.end(), layer, layer + kSlots * kRow);
    v.insert(v.end(), layer + kSlots * kRow, layer + 2 * kSlots * kRow);
  }
}

class Handover : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    host_.load_dirs(plugin_search_dirs({}, fs::current_path()));
    if (!host_.has(ComponentKind::kBackend, GetParam()))
      GTEST_SKIP() << "backend '" << GetParam() << "' is not built";
    sender_ = host_.create_backend("reference", Options("backend.options"));
    receiver_ = host_.create_backend(GetParam(), Options("backend.options"));
  }

  PluginHost host_;
  std::shared_ptr<Backend> sender_, receiver_;
};

// For every pair of dtypes: the cache handed over holds exactly what the
// receiving backend's own write() stores for the values the sender held
// (for onednn, its SIMD conversion, and its q8_0 tiles on VNNI CPUs).
TEST_P(Handover, GivesTheBytesTheReceiverStoresItself) {
  const size_t n = static_cast<size_t>(kLayers) * kSlots * kRow;
  const std::vector<float> k = testdata::random_floats(n, 11, -3.0f, 3.0f);
  const std::vector<float> v = testdata::random_floats(n, 12, -1.0f, 1.0f);
  const DType types[] = {DType::kF32, DType::kF16, DType::kQ8_0};
  for (DType from : types) {
    for (DType to : types) {
      SCOPED_TRACE(std::string(dtype_name(from)) + " -> " + std::string(dtype_name(to)));
      auto sent = sender_->create_kv_cache(spec_of(from));
      write_rows(*sent, k, v);
      auto received = receiver_->create_kv_cache(spec_of(to));
      const SlotRange all{0, kSlots};
      const HandoverStats stats = hand_over(KVEndpoint{*sent, DUET_ABI_MINOR},
                                            KVEndpoint{*received, DUET_ABI_MINOR}, {&all, 1});
      EXPECT_EQ(stats.bytes, 2 * kLayers * kSlots * *dtype_row_bytes(from, kRow));

      std::vector<uint8_t> sent_bytes, got, want;
      sent->export_slots(kSlots, sent_bytes);
      std::vector<float> held_k, held_v;
      values_of(sent_bytes, from, held_k, held_v);
      auto own = receiver_->create_kv_cache(spec_of(to));
      write_rows(*own, held_k, held_v);
      received->export_slots(kSlots, got);
      own->export_slots(kSlots, want);
      EXPECT_EQ(got, want);
    }
  }
}

// Only the given slot ranges move: the receiver's other slots keep what it
// held (another sequence's cache). A cache of a plugin built before ABI 1.4
// moves through KVCache's base versions (export_slots/import_slots of the
// prefix) and ends with the same bytes.
TEST_P(Handover, MovesTheGivenRangesAloneThroughEitherABI) {
  const size_t n = static_cast<size_t>(kLayers) * kSlots * kRow;
  const std::vector<float> k = testdata::random_floats(n, 21, -3.0f, 3.0f);
  const std::vector<float> v = testdata::random_floats(n, 22, -1.0f, 1.0f);
  const std::vector<float> other_k = testdata::random_floats(n, 23, -2.0f, 2.0f);
  const std::vector<float> other_v = testdata::random_floats(n, 24, -2.0f, 2.0f);
  const std::vector<SlotRange> ranges = {{3, 5}, {16, 9}, {39, 1}};
  for (DType to : {DType::kF32, DType::kQ8_0}) {
    SCOPED_TRACE(std::string(dtype_name(to)));
    auto sent = sender_->create_kv_cache(spec_of(DType::kF16));
    write_rows(*sent, k, v);
    std::vector<uint8_t> sent_bytes;
    sent->export_slots(kSlots, sent_bytes);
    std::vector<float> held_k, held_v;
    values_of(sent_bytes, DType::kF16, held_k, held_v);
    // What the receiver must end with: its own rows of the sent values in
    // the ranges, of the other values elsewhere.
    std::vector<float> want_k = other_k, want_v = other_v;
    for (int32_t l = 0; l < kLayers; ++l) {
      for (const SlotRange& r : ranges) {
        const auto at = (static_cast<size_t>(l) * kSlots + static_cast<size_t>(r.first)) * kRow;
        const auto count = static_cast<size_t>(r.count) * kRow;
        std::copy_n(held_k.begin() + static_cast<std::ptrdiff_t>(at), count,
                    want_k.begin() + static_cast<std::ptrdiff_t>(at));
        std::copy_n(held_v.begin() + static_cast<std::ptrdiff_t>(at), count,
                    want_v.begin() + static_cast<std::ptrdiff_t>(at));
      }
    }
    auto own = receiver_->create_kv_cache(spec_of(to));
    write_rows(*own, want_k, want_v);
    std::vector<uint8_t> want;
    own->export_slots(kSlots, want);
    for (uint32_t abi : {uint32_t{3}, uint32_t{DUET_ABI_MINOR}}) {
      SCOPED_TRACE("receiver and sender of ABI 1." + std::to_string(abi));
      auto received = receiver_->create_kv_cache(spec_of(to));
      write_rows(*received, other_k, other_v);
      const HandoverStats stats =
          hand_over(KVEndpoint{*sent, abi}, KVEndpoint{*received, abi}, ranges);
      EXPECT_EQ(stats.bytes, 2 * kLayers * 15 * *dtype_row_bytes(DType::kF16, kRow));
      std::vector<uint8_t> got;
      received->export_slots(kSlots, got);
      EXPECT_EQ(got, want);
    }
  }
}

TEST(SlotRanges, AdjacentRangesMerge) {
  std::vector<SlotRange> ranges;
  add_slot_range(ranges, 0, 4);
  add_slot_range(ranges, 4, 4);   // continues the first
  add_slot_range(ranges, 12, 2);  // a gap: a range of its own
  add_slot_range(ranges, 20, 0);  // empty: nothing
  ASSERT_EQ(ranges.size(), 2u);
  EXPECT_EQ(ranges[0].first, 0);
  EXPECT_EQ(ranges[0].count, 8);
  EXPECT_EQ(ranges[1].first, 12);
  EXPECT_EQ(ranges[1].count, 2);
}

INSTANTIATE_TEST_SUITE_P(Receivers, Handover, ::testing::Values("reference", "onednn"),
                         [](const auto& p) { return p.param; });

}  // namespace
}  // namespace duet
