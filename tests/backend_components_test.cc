// How core pairs a backend's own KV-cache storage with an attention a plugin
// registered (core/src/plugins/backend_components.h), for a backend built
// before ABI 1.9: one that cannot be asked for slot rows and keeps its
// caches in tiles (tests/plugins/test_plugin.cc, VARIANT_abi_1_8).
#include "plugins/backend_components.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <memory>
#include <string>

#include "duet/app/plugin_host.h"
#include "duet/backend.h"
#include "duet/options.h"

namespace duet {
namespace {

namespace fs = std::filesystem;

KVCacheSpec f16_tiles() {
  KVCacheSpec spec;
  spec.impl = "tiles";
  spec.n_layers = 2;
  spec.n_kv_heads = 2;
  spec.head_dim = 8;
  spec.capacity_tokens = 32;
  spec.block_tokens = 32;
  spec.dtype = DType::kF16;
  return spec;
}

class PreRowsBackend : public ::testing::Test {
 protected:
  void SetUp() override {
    const PluginRecord r =
        host_.load(fs::path(DUET_TEST_PLUGIN_DIR) / "abi_1_8" / "duet-test-abi-1-8.so");
    ASSERT_TRUE(r.loaded) << r.refusal;
    backend_ = host_.create_backend("test_tiler", Options());
  }
  PluginHost host_;
  std::shared_ptr<Backend> backend_;
};

TEST_F(PreRowsBackend, CannotBeAskedForRows) {
  EXPECT_EQ(host_.backend_abi_minor("test_tiler"), 8u);
  EXPECT_FALSE(host_.backend_makes_kv_rows("test_tiler"));
}

TEST_F(PreRowsBackend, ItsTilesAreRefusedToAPluginAttentionWithTheFix) {
  EXPECT_EQ(layout_mismatch(*backend_, host_, "test_reads_rows", f16_tiles()),
            "it reads KV caches stored as slot rows, but backend 'test_tiler' keeps a f16 cache "
            "in its own tiles of 16 slots; set components.kv_cache.dtype to another type, or use "
            "the backend's own attention");
  EXPECT_EQ(layout_mismatch(*backend_, host_, "own", f16_tiles()), "");
}

TEST_F(PreRowsBackend, ItsStorageIsNeverAskedForRows) {
  // Its create_kv_cache_rows, past the end of a 1.8 vtable, aborts.
  const std::shared_ptr<KVCache> kv =
      make_kv_cache(*backend_, host_, f16_tiles(), Options(), "test_reads_rows");
  ASSERT_NE(kv, nullptr);
  EXPECT_EQ(kv->layer(0).tile_slots, 16);
}

TEST(BackendComponents, ABackendOfThisAbiMakesRows) {
  PluginHost host;
  host.load_dirs(plugin_search_dirs({}, fs::current_path()));
  ASSERT_TRUE(host.has(ComponentKind::kBackend, "reference"));
  EXPECT_TRUE(host.backend_makes_kv_rows("reference"));
}

}  // namespace
}  // namespace duet
