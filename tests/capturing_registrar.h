// capturing_registrar.h — a PluginRegistrar for tests that call a plugin's
// create() themselves: it keeps the backend factories and the names of
// everything else.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "duet/plugin.h"

namespace duet::testing_support {

class CapturingRegistrar final : public PluginRegistrar {
 public:
  void add_backend(const std::string& name, const std::string&, BackendFactory f) override {
    backends[name] = std::move(f);
  }
  void add_sampler(const std::string& name, const std::string&, SamplerFactory) override {
    samplers.push_back(name);
  }
  void add_stage(const std::string& name, const std::string&, StageFactory) override {
    stages.push_back(name);
  }
  void add_attention(const std::string& backend, const std::string& name, const std::string&,
                     AttentionFactory) override {
    attentions.push_back(backend + "/" + name);
  }
  void add_kv_cache(const std::string& backend, const std::string& name, const std::string&,
                    KVCacheCheck, KVCacheFactory) override {
    kv_caches.push_back(backend + "/" + name);
  }
  void add_vocab_sampler(const std::string& name, const std::string&,
                         VocabSamplerFactory) override {
    samplers.push_back(name);
  }
  std::map<std::string, BackendFactory> backends;
  std::vector<std::string> samplers;
  std::vector<std::string> stages;
  std::vector<std::string> attentions;
  std::vector<std::string> kv_caches;
};

}  // namespace duet::testing_support
