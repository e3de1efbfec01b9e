#include "compare_output.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <iomanip>
#include <sstream>

#include "bench_stats.h"
#include "json_writer.h"

namespace duet::compare {
namespace {

// The fidelity figures, in the order tables and CSV show them.
const char* const kFidelityKeys[] = {"perplexity",     "perplexity_ratio", "kld_mean",
                                     "kld_median",     "kld_p99",          "kld_max",
                                     "top1_agreement", "rms_delta_p",      "logits_nmse"};

// The test names every variant ran, in first-seen order.
std::vector<std::string> test_names(const CompareResult& r) {
  std::vector<std::string> names;
  for (const auto& v : r.variants) {
    for (const auto& s : v.speed) {
      if (std::find(names.begin(), names.end(), s.test) == names.end()) names.push_back(s.test);
    }
  }
  return names;
}

const SpeedResult* find_test(const VariantResult& v, const std::string& test) {
  for (const auto& s : v.speed) {
    if (s.test == test) return &s;
  }
  return nullptr;
}

std::string fixed(double value, int digits) {
  std::ostringstream s;
  s << std::fixed << std::setprecision(digits) << value;
  return s.str();
}

std::string sci(double value) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3g", value);
  return buf;
}

// Markdown-style table: a header row, a rule and rows, padded per column.
void table(std::ostream& out, const std::vector<std::string>& header,
           const std::vector<std::vector<std::string>>& rows) {
  std::vector<size_t> width(header.size());
  for (size_t c = 0; c < header.size(); ++c) {
    width[c] = header[c].size();
    for (const auto& row : rows) width[c] = std::max(width[c], row[c].size());
  }
  auto line = [&](const std::vector<std::string>& cells) {
    out << "|";
    for (size_t c = 0; c < cells.size(); ++c)
      out << " " << std::left << std::setw(static_cast<int>(width[c])) << cells[c] << " |";
    out << "\n";
  };
  line(header);
  out << "|";
  for (size_t w : width) out << " " << std::string(w, '-') << " |";
  out << "\n";
  for (const auto& row : rows) line(row);
}

std::string status_of(const VariantResult& v) {
  if (v.failure)
    return "failed (" + v.failure->step + ", exit " + std::to_string(v.failure->exit_code) + ")";
  return v.status;
}

}  // namespace

void print_tables(std::ostream& out, const Experiment& e, const CompareResult& r) {
  const std::vector<std::string> tests = test_names(r);
  if (!tests.empty()) {
    std::vector<std::string> header{"variant", "backend"};
    for (const auto& t : tests) header.push_back(t + " t/s (min-max)");
    const bool any_device =
        std::any_of(r.variants.begin(), r.variants.end(),
                    [](const VariantResult& v) { return v.device_bytes.has_value(); });
    header.insert(header.end(), {"ttft ms", "load ms", "peak RSS MiB"});
    if (any_device) header.push_back("device MiB");
    header.push_back("status");
    std::vector<std::vector<std::string>> rows;
    for (const auto& v : r.variants) {
      std::vector<std::string> row{v.variant->name, v.backend.empty() ? "-" : v.backend};
      std::string ttft = "-";
      for (const auto& t : tests) {
        const SpeedResult* s = find_test(v, t);
        if (s == nullptr || s->tokens_per_second.empty()) {
          row.push_back("-");
          continue;
        }
        const bench::BenchSummary st = bench::summarize_values(s->tokens_per_second);
        row.push_back(fixed(st.median, 1) + " (" + fixed(st.min, 1) + "-" + fixed(st.max, 1) + ")");
        if (!s->ttft_seconds.empty() && ttft == "-")
          ttft = fixed(bench::summarize_values(s->ttft_seconds).median * 1000, 1);
      }
      row.push_back(ttft);
      row.push_back(v.load_seconds.empty()
                        ? "-"
                        : fixed(bench::summarize_values(v.load_seconds).median * 1000, 1));
      row.push_back(v.peak_rss_bytes ? fixed(static_cast<double>(v.peak_rss_bytes) / (1 << 20), 1)
                                     : "-");
      if (any_device) {
        row.push_back(v.device_bytes ? fixed(static_cast<double>(*v.device_bytes) / (1 << 20), 1)
                                     : "-");
      }
      row.push_back(status_of(v));
      rows.push_back(row);
    }
    out << "Speed (" << e.speed.rounds << " rounds, variants alternating; median of the rounds)\n";
    table(out, header, rows);
  }
  if (!e.fidelity.text.empty()) {
    std::vector<std::vector<std::string>> rows;
    for (const auto& v : r.variants) {
      if (!v.fidelity) {
        rows.push_back({v.variant->name, "-", "-", "-", "-", "-", "-", "-", "-", "-"});
        continue;
      }
      const auto& f = *v.fidelity;
      auto at = [&](const char* k) { return f.count(k) ? f.at(k) : NAN; };
      rows.push_back({v.variant->name, fixed(at("perplexity"), 4), fixed(at("perplexity_ratio"), 5),
                      sci(at("kld_mean")), sci(at("kld_median")), sci(at("kld_p99")),
                      sci(at("kld_max")), fixed(at("top1_agreement") * 100, 2),
                      fixed(at("rms_delta_p") * 100, 3), sci(at("logits_nmse"))});
    }
    out << "\nFidelity against " << e.baseline << " (teacher-forced on "
        << e.fidelity.text.filename().string()
        << (e.fidelity.ctx ? ", windows of " + std::to_string(e.fidelity.ctx)
                           : std::string(", whole text"))
        << ")\n";
    table(out,
          {"variant", "perplexity", "ratio", "KLD mean", "KLD median", "KLD p99", "KLD max",
           "top-1 %", "RMS dp %", "logits NMSE"},
          rows);
  }
  if (!e.greedy.prompts.empty()) {
    std::vector<std::string> header{"variant"};
    for (size_t i = 0; i < e.greedy.prompts.size(); ++i)
      header.push_back("prompt " + std::to_string(i + 1));
    std::vector<std::vector<std::string>> rows;
    for (const auto& v : r.variants) {
      std::vector<std::string> row{v.variant->name};
      for (size_t i = 0; i < e.greedy.prompts.size(); ++i) {
        if (i >= v.greedy.size()) {
          row.push_back("-");
          continue;
        }
        const GreedyResult& g = v.greedy[i];
        row.push_back(
            std::to_string(g.matching_tokens) + "/" + std::to_string(g.tokens.size()) + " same" +
            (g.first_divergence ? ", parts at " + std::to_string(*g.first_divergence) : ""));
      }
      rows.push_back(row);
    }
    out << "\nGreedy answers against " << e.baseline << " (leading tokens that match, of "
        << e.greedy.tokens << " at most)\n";
    table(out, header, rows);
  }
  bool any_failed = false;
  for (const auto& v : r.variants) {
    if (!v.failure) continue;
    if (!any_failed) out << "\nFailed\n";
    any_failed = true;
    out << "  " << v.variant->name << ": " << v.failure->step << ", exit code "
        << v.failure->exit_code << ": " << v.failure->reason << "\n";
  }
  if (r.interrupted)
    out << "\nInterrupted: the figures above are what was measured before Ctrl-C.\n";
}

std::string compare_json(const Experiment& e, const CompareResult& r) {
  JsonWriter j;
  j.begin_object();
  j.field("duet_version", DUET_VERSION);
  j.field("experiment", e.source.string());
  j.field("baseline", e.baseline);
  j.key("machine").begin_object();
  j.field("cpu_model", r.cpu_model);
  j.key("cpu_features").begin_array();
  for (const auto& f : r.cpu_features) j.value(f);
  j.end_array().end_object();
  j.key("workload").begin_object();
  auto ints = [&j](const char* k, const std::vector<int32_t>& values) {
    j.key(k).begin_array();
    for (int32_t v : values) j.value(v);
    j.end_array();
  };
  ints("prompt_tokens", e.speed.prompt_tokens);
  ints("gen_tokens", e.speed.gen_tokens);
  ints("depths", e.speed.depths);
  j.field("rounds", e.speed.rounds);
  j.field("fidelity_text", e.fidelity.text.string());
  j.field("ctx", e.fidelity.ctx);
  j.field("prompts", static_cast<int64_t>(e.greedy.prompts.size()));
  j.field("greedy_tokens", e.greedy.tokens);
  j.end_object();
  j.field("interrupted", r.interrupted);
  j.key("variants").begin_array();
  for (const auto& v : r.variants) {
    j.begin_object();
    j.field("name", v.variant->name);
    j.key("overrides").begin_array();
    for (const auto& o : v.variant->overrides) j.value(o);
    j.end_array();
    j.field("backend", v.backend);
    j.field("status", v.failure ? std::string("failed") : v.status);
    j.key("failure");
    if (v.failure) {
      j.begin_object().field("step", v.failure->step).field("exit_code", v.failure->exit_code);
      j.field("reason", v.failure->reason).end_object();
    } else {
      j.null();
    }
    j.key("load_seconds");
    v.load_seconds.empty() ? j.null() : j.value(bench::summarize_values(v.load_seconds).median);
    j.key("peak_rss_bytes");
    v.peak_rss_bytes ? j.value(v.peak_rss_bytes) : j.null();
    j.key("device_bytes");
    v.device_bytes ? j.value(*v.device_bytes) : j.null();
    j.key("speed").begin_array();
    for (const auto& s : v.speed) {
      const bench::BenchSummary st = bench::summarize_values(s.tokens_per_second);
      j.begin_object().field("test", s.test);
      j.key("tokens_per_second").begin_object();
      j.field("median", st.median).field("min", st.min).field("max", st.max);
      j.key("samples").begin_array();
      for (double x : s.tokens_per_second) j.value(x);
      j.end_array().end_object();
      j.key("ttft_ms");
      s.ttft_seconds.empty() ? j.null()
                             : j.value(bench::summarize_values(s.ttft_seconds).median * 1000);
      j.end_object();
    }
    j.end_array();
    j.key("fidelity");
    if (v.fidelity) {
      j.begin_object();
      for (const auto& [k, x] : *v.fidelity) j.field(k, x);
      j.end_object();
    } else {
      j.null();
    }
    j.key("greedy").begin_array();
    for (size_t i = 0; i < v.greedy.size(); ++i) {
      const GreedyResult& g = v.greedy[i];
      j.begin_object()
          .field("prompt", g.prompt)
          .field("tokens", static_cast<int64_t>(g.tokens.size()));
      j.field("matching_tokens", g.matching_tokens).key("first_divergence");
      g.first_divergence ? j.value(*g.first_divergence) : j.null();
      j.field("baseline_continuation", g.baseline_continuation)
          .field("continuation", g.continuation);
      j.end_object();
    }
    j.end_array();
    j.end_object();
  }
  j.end_array().end_object();
  return j.str();
}

std::string compare_csv(const Experiment& e, const CompareResult& r) {
  (void)e;
  const std::vector<std::string> tests = test_names(r);
  std::ostringstream s;
  s << "variant,backend,status";
  for (const auto& t : tests)
    s << "," << t << "_tps_median," << t << "_tps_min," << t << "_tps_max";
  s << ",peak_rss_bytes";
  for (const char* k : kFidelityKeys) s << "," << k;
  s << "\n" << std::setprecision(9);
  for (const auto& v : r.variants) {
    s << v.variant->name << "," << v.backend << "," << (v.failure ? "failed" : v.status);
    for (const auto& t : tests) {
      const SpeedResult* sp = find_test(v, t);
      if (sp == nullptr || sp->tokens_per_second.empty()) {
        s << ",,,";
        continue;
      }
      const bench::BenchSummary st = bench::summarize_values(sp->tokens_per_second);
      s << "," << st.median << "," << st.min << "," << st.max;
    }
    s << ",";
    if (v.peak_rss_bytes) s << v.peak_rss_bytes;
    for (const char* k : kFidelityKeys) {
      s << ",";
      if (v.fidelity && v.fidelity->count(k)) s << v.fidelity->at(k);
    }
    s << "\n";
  }
  return s.str();
}

}  // namespace duet::compare
