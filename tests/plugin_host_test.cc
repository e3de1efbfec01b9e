// The plugin host: a good plugin loads and its components work; every kind
// of bad library is refused with its reason while the host keeps working.
#include "duet/app/plugin_host.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "duet/error.h"

namespace duet {
namespace {

namespace fs = std::filesystem;

fs::path test_plugin(const std::string& variant) {
  return fs::path(DUET_TEST_PLUGIN_DIR) / ("duet-test-" + variant + ".so");
}

TEST(PluginHost, GoodPluginLoadsAndItsSamplerWorks) {
  PluginHost host;
  PluginRecord r = host.load(test_plugin("good"));
  ASSERT_TRUE(r.loaded) << r.refusal;
  EXPECT_EQ(r.name, "test-good");
  EXPECT_EQ(r.version, "1.2.3");
  // and test_abort, test_oom, test_throw_int, test_throw_int_apply, test_throw_stage
  ASSERT_EQ(r.components.size(), 7u);
  EXPECT_EQ(r.components[0].name, "test_throw");
  EXPECT_EQ(r.components[1].name, "test_first");
  EXPECT_EQ(r.components[1].kind, ComponentKind::kSampler);
  EXPECT_TRUE(host.has(ComponentKind::kSampler, "test_first"));

  auto sampler =
      host.create_sampler("test_first", Options("components.sampler.chain[0].test_first"));
  Candidates c{{7, 3}, {0.5f, 2.0f}, -1};
  sampler->apply(c, SamplingContext{});
  EXPECT_EQ(c.selected, 7);
}

TEST(PluginHost, ObjectsKeepTheirLibraryLoadedPastTheHost) {
  std::shared_ptr<Sampler> sampler;
  {
    PluginHost host;
    ASSERT_TRUE(host.load(test_plugin("good")).loaded);
    sampler = host.create_sampler("test_first", Options());
  }
  // The host is gone; calling into the plugin's code must still work, and
  // destroying the object must precede destroy() (which aborts otherwise).
  Candidates c{{11}, {1.0f}, -1};
  sampler->apply(c, SamplingContext{});
  EXPECT_EQ(c.selected, 11);
  EXPECT_EQ(sampler->name(), "test_first");
  sampler.reset();
}

TEST(PluginHost, FactoryOptionErrorsReachTheCaller) {
  PluginHost host;
  ASSERT_TRUE(host.load(test_plugin("good")).loaded);
  Options o("components.sampler.chain[0].test_first");
  o.set("tempreature", "1");
  try {
    host.create_sampler("test_first", o);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kConfig);
    EXPECT_NE(std::string(e.what()).find("tempreature"), std::string::npos) << e.what();
  }
}

struct Refusal {
  const char* variant;
  std::string reason_substring;
};

class PluginRefusal : public ::testing::TestWithParam<Refusal> {};

TEST_P(PluginRefusal, IsRefusedWithItsReasonAndTheHostKeepsWorking) {
  PluginHost host;
  PluginRecord bad = host.load(test_plugin(GetParam().variant));
  EXPECT_FALSE(bad.loaded);
  EXPECT_NE(bad.refusal.find(GetParam().reason_substring), std::string::npos)
      << "refusal was: " << bad.refusal;
  EXPECT_TRUE(bad.components.empty());
  EXPECT_FALSE(host.has(ComponentKind::kSampler, "test_first"));

  PluginRecord good = host.load(test_plugin("good"));
  ASSERT_TRUE(good.loaded) << good.refusal;
  EXPECT_NE(host.create_sampler("test_first", Options()), nullptr);
}

INSTANTIATE_TEST_SUITE_P(
    EveryWayToFail, PluginRefusal,
    ::testing::Values(Refusal{"abi-major", "ABI major version mismatch: plugin 2." +
                                               std::to_string(DUET_ABI_MINOR) + ", host 1." +
                                               std::to_string(DUET_ABI_MINOR)},
                      Refusal{"abi-minor-newer",
                              "plugin needs ABI 1." + std::to_string(DUET_ABI_MINOR + 1) +
                                  " but this host provides 1." + std::to_string(DUET_ABI_MINOR)},
                      Refusal{"bad-toolchain", "toolchain mismatch: plugin built with 'msvc"},
                      Refusal{"cxx23",
                              "toolchain mismatch: plugin built with -std=c++23 (__cplusplus "
                              "202302L), host with -std=c++20 (__cplusplus 202002L) (same "
                              "compiler ABI and standard library); build the plugin with the "
                              "host's standard"},
                      Refusal{"no-entry", "no duet_plugin_entry() symbol"},
                      Refusal{"probe-no", "cannot run here: no test device present"},
                      Refusal{"create-throws", "create() failed: create exploded"},
                      Refusal{"create-error", "create() failed: license file missing"},
                      Refusal{"short-descriptor", "descriptor is 16 bytes"},
                      Refusal{"layout-mismatch",
                              "struct duet::StepBatch (duet/step_batch.h) is " +
                                  std::to_string(sizeof(StepBatch) + 8) +
                                  " bytes, aligned to 8, in the plugin and " +
                                  std::to_string(sizeof(StepBatch)) +
                                  ", aligned to 8, in this host: the plugin was built against "
                                  "other Duet headers of the same ABI version; rebuild it against "
                                  "this Duet SDK's headers"},
                      Refusal{"no-layouts",
                              "lists no SDK struct layouts; define it with "
                              "DUET_DEFINE_PLUGIN"},
                      Refusal{"duplicate-component", "sampler 'test_first' registered twice"},
                      Refusal{"not-a-library", "not a loadable shared library"},
                      Refusal{"missing-file", "file not found"}),
    [](const auto& param_info) {
      std::string name = param_info.param.variant;
      for (char& ch : name) ch = ch == '-' ? '_' : ch;
      return name;
    });

TEST(PluginHost, SecondPluginWithTheSameNameIsRefused) {
  PluginHost host;
  ASSERT_TRUE(host.load(test_plugin("good")).loaded);
  PluginRecord dup = host.load(test_plugin("duplicate-name"));
  EXPECT_FALSE(dup.loaded);
  EXPECT_NE(dup.refusal.find("a plugin named 'test-good' is already loaded"), std::string::npos)
      << dup.refusal;
}

TEST(PluginHost, LoadDirsScansOnlyPluginFilesAndRecordsEveryOne) {
  PluginHost host;
  host.load_dirs({DUET_TEST_PLUGIN_DIR});
  size_t loaded = 0;
  for (const auto& r : host.records()) {
    EXPECT_TRUE(is_plugin_file_name(r.path.filename().string()));
    loaded += r.loaded ? 1 : 0;
  }
  // test-abi-1-0, test-extensions and test-good; duplicate-name comes after
  // good alphabetically.
  EXPECT_EQ(loaded, 3u);
  EXPECT_GE(host.records().size(), 13u);
}

// What load_dirs leaves untried is noted with the reason (`duet plugins
// --verbose`): files not named duet-<name>.so; sub-folders are not entered.
TEST(PluginHost, LoadDirsNotesTheFilesItDoesNotTry) {
  const fs::path dir = fs::temp_directory_path() / "duet_skipped_files_test";
  fs::remove_all(dir);
  fs::create_directories(dir / "duet-folder.so");
  for (const char* name : {"notes.txt", "libduet-x.so", "duet-x.so.1", "duet-bad.so"}) {
    std::ofstream(dir / name) << "not a library";
  }
  PluginHost host;
  host.load_dirs({dir});
  std::vector<std::string> skipped;
  for (const SkippedFile& s : host.skipped()) {
    skipped.push_back(s.path.filename().string());
    EXPECT_NE(s.reason.find("not named duet-<name>.so"), std::string::npos) << s.reason;
  }
  EXPECT_EQ(skipped, (std::vector<std::string>{"duet-x.so.1", "libduet-x.so", "notes.txt"}));
  host.load_dirs({dir});  // as for every pipeline a long-lived host builds
  EXPECT_EQ(host.skipped().size(), 3u);
  // duet-bad.so was tried (and refused, as a record says); the folder was not.
  ASSERT_EQ(host.records().size(), 1u);
  EXPECT_EQ(host.records()[0].path.filename(), "duet-bad.so");
  EXPECT_FALSE(host.records()[0].loaded);
  fs::remove_all(dir);
}

// A third party's plugin that registers a built-in component name is the
// one refused, even from a folder searched before Duet's own (issue 33).
TEST(PluginHost, ABuiltInPluginKeepsItsComponentNames) {
  PluginHost host;
  host.load_dirs(plugin_search_dirs({std::string(DUET_TEST_PLUGIN_DIR) + "/clash"}, "/"));
  const PluginRecord* clash = nullptr;
  const PluginRecord* samplers = nullptr;
  for (const PluginRecord& r : host.records()) {
    if (r.name == "test-clash-builtin") clash = &r;
    if (r.name == "samplers") samplers = &r;
  }
  ASSERT_NE(clash, nullptr);
  ASSERT_NE(samplers, nullptr);
  EXPECT_TRUE(samplers->loaded) << samplers->refusal;
  EXPECT_FALSE(clash->loaded);
  EXPECT_NE(clash->refusal.find("sampler 'greedy' is already registered by plugin 'samplers'"),
            std::string::npos)
      << clash->refusal;
  EXPECT_TRUE(host.has(ComponentKind::kSampler, "top_k"));
  EXPECT_FALSE(host.has(ComponentKind::kSampler, "test_clash_own"));
}

TEST(PluginHost, UnknownComponentNamesTheKnownOnesAndSuggests) {
  PluginHost host;
  ASSERT_TRUE(host.load(test_plugin("good")).loaded);
  try {
    host.create_sampler("test_frist", Options());
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kPlugin);
    std::string msg = e.what();
    EXPECT_NE(msg.find("no sampler named 'test_frist'; did you mean 'test_first'?"),
              std::string::npos)
        << msg;
  }
  EXPECT_THROW(host.create_backend("cuda", Options()), Error);
}

// A name no loaded plugin has and no typo of one: the refused plugins, any
// of which may have provided it, are named with their reasons.
TEST(PluginHost, UnknownComponentNamesTheRefusedPlugins) {
  PluginHost host;
  ASSERT_TRUE(host.load(test_plugin("good")).loaded);
  ASSERT_FALSE(host.load(test_plugin("cxx23")).loaded);
  const auto message = [&](const std::string& name) {
    try {
      host.create_sampler(name, Options());
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("(accepted)");
  };
  const std::string unknown = message("banned_words");
  EXPECT_NE(unknown.find("refused plugins, one of which may provide it: 'test-plugin' "
                         "(duet-test-cxx23.so): toolchain mismatch"),
            std::string::npos)
      << unknown;
  EXPECT_EQ(message("test_frist").find("refused plugins"), std::string::npos) << "a typo";
}

TEST(PluginHost, APluginBuiltAgainstAbi10LoadsAndItsSamplerWorks) {
  PluginHost host;
  PluginRecord r = host.load(test_plugin("abi-1-0"));
  ASSERT_TRUE(r.loaded) << r.refusal;
  auto sampler = host.create_sampler("test_abi_1_0", Options());
  Candidates c{{5, 9}, {1.0f, 3.0f}, -1};
  sampler->apply(c, SamplingContext{});
  EXPECT_EQ(c.selected, 5);
  EXPECT_EQ(host.backend_abi_minor("test_old"), 0u);
}

TEST(PluginHost, ExtensionsAreKeptPerBackendWithWhyTheyCannotServe) {
  PluginHost host;
  ASSERT_TRUE(host.load(test_plugin("extensions")).loaded);
  ASSERT_TRUE(host.load(test_plugin("abi-1-0")).loaded);
  std::vector<std::string> names;
  for (const auto& info : host.extensions(ComponentKind::kAttention, "reference")) {
    names.push_back(info.name);
    EXPECT_EQ(info.plugin, "test-extensions");
    EXPECT_EQ(info.backend, "reference");
  }
  EXPECT_EQ(names, (std::vector<std::string>{"test_f32_only", "test_forgets_row", "test_full",
                                             "test_no_scale", "test_throw_int"}));
  ASSERT_EQ(host.extensions(ComponentKind::kKVCache, "reference").size(), 3u);
  // A backend nobody provides, and one built against ABI 1.0 (whose device
  // and caches lack what 1.1 added).
  const auto orphan = host.extensions(ComponentKind::kAttention, "nosuch");
  ASSERT_EQ(orphan.size(), 1u);
  EXPECT_EQ(host.unavailable_reason(orphan[0]),
            "backend 'nosuch' is not loaded (loaded backends: 'test_old')");
  const auto old = host.extensions(ComponentKind::kAttention, "test_old");
  ASSERT_EQ(old.size(), 1u);
  EXPECT_EQ(host.unavailable_reason(old[0]),
            "backend 'test_old' (plugin 'test-abi-1-0') was built against Duet ABI 1.0; attention "
            "and KV-cache plugins need a backend built against 1.1 or later");
}

TEST(PluginHost, SearchDirsFollowConfigThenEnvironmentAndNameMissingFolders) {
  fs::path tmp = fs::temp_directory_path() / "duet_search_dirs_test";
  fs::create_directories(tmp / "from_config");
  fs::create_directories(tmp / "from_env");
  ::setenv("DUET_PLUGIN_PATH", ((tmp / "from_env").string() + ":/does/not/exist").c_str(), 1);
  auto dirs = plugin_search_dirs({"from_config"}, tmp);
  // A misspelt folder in plugins.paths is an error; in DUET_PLUGIN_PATH a
  // warning for the program to print.
  try {
    plugin_search_dirs({"from_config", "missing"}, tmp);
    ADD_FAILURE() << "a missing plugins.paths folder was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kConfig);
    EXPECT_NE(std::string(e.what()).find("plugins.paths[1]: 'missing' ("), std::string::npos)
        << e.what();
  }
  EXPECT_EQ(plugin_path_warnings(),
            std::vector<std::string>{
                "DUET_PLUGIN_PATH names '/does/not/exist', which is not a folder; it is skipped"});
  ::unsetenv("DUET_PLUGIN_PATH");
  EXPECT_TRUE(plugin_path_warnings().empty());
  ASSERT_GE(dirs.size(), 2u);
  EXPECT_EQ(dirs[0], fs::weakly_canonical(tmp / "from_config"));
  EXPECT_EQ(dirs[1], fs::weakly_canonical(tmp / "from_env"));
  // The build tree's plugin folder comes last for a build-tree libduet.
  EXPECT_EQ(dirs.back(), fs::weakly_canonical(fs::path(DUET_BUILD_DIR) / "plugins"));
  fs::remove_all(tmp);
}

TEST(PluginHost, PluginFileNames) {
  EXPECT_TRUE(is_plugin_file_name("duet-reference.so"));
  EXPECT_FALSE(is_plugin_file_name("libduet.so"));
  EXPECT_FALSE(is_plugin_file_name("duet-.so"));
  EXPECT_FALSE(is_plugin_file_name("duet-reference.so.1"));
}

}  // namespace
}  // namespace duet
