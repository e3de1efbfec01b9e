// module.cc — duet._duet, the compiled half of the Python package (the
// Python half, python/duet/__init__.py, holds the documented API and turns
// keyword arguments into the JSON request objects PyPipeline reads).
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include "duet/app/plugin_host.h"
#include "duet/error.h"
#include "py_pipeline.h"
#include "request_fields.h"

namespace nb = nanobind;

namespace duet::python {
namespace {

// The class of duet.errors for `kind`.
const char* error_class(ErrorKind kind) {
  switch (kind) {
    case ErrorKind::kUsage:
      return "UsageError";
    case ErrorKind::kConfig:
      return "ConfigError";
    case ErrorKind::kModelFile:
      return "ModelFileError";
    case ErrorKind::kPlugin:
      return "PluginError";
    case ErrorKind::kOutOfMemory:
      return "OutOfMemoryError";
    case ErrorKind::kInputRejected:
      return "InputRejectedError";
    case ErrorKind::kMissingTool:
      return "MissingToolError";
    case ErrorKind::kInternal:
      break;
  }
  return "InternalError";
}

// Raises duet.errors.NAME(args...) as the pending Python error.
template <typename... Args>
void set_error(const char* name, Args&&... args) {
  nb::object cls = nb::module_::import_("duet.errors").attr(name);
  nb::object error = cls(std::forward<Args>(args)...);
  PyErr_SetObject(cls.ptr(), error.ptr());
}

void translate(const std::exception_ptr& p, void*) {
  try {
    std::rethrow_exception(p);
  } catch (const Error& e) {
    set_error(error_class(e.kind()), e.what());
  } catch (const serve::FieldError& e) {
    set_error("RequestError", e.message, e.param);
  }
}

// Generation::logits as a NumPy array that shares its memory.
nb::object logits_array(const Generation& g) {
  if (!g.logits) return nb::none();
  auto* owner = new std::shared_ptr<std::vector<float>>(g.logits);
  nb::capsule keep(
      owner, [](void* p) noexcept { delete static_cast<std::shared_ptr<std::vector<float>>*>(p); });
  const size_t rows = g.logits->size() / static_cast<size_t>(g.n_vocab);
  // Read-only: the memory is shared with every array made of this result.
  return nb::cast(nb::ndarray<nb::numpy, const float, nb::ndim<2>>(
      g.logits->data(), {rows, static_cast<size_t>(g.n_vocab)}, keep));
}

nb::list plugin_records() {
  std::vector<PluginRecord> records;
  {
    nb::gil_scoped_release release;
    std::lock_guard lock(plugin_host_mutex());
    plugin_host().load_dirs(plugin_search_dirs({}, ""));
    records = plugin_host().records();
  }
  nb::list out;
  for (const PluginRecord& r : records) {
    nb::list components;
    for (const ComponentInfo& c : r.components) {
      nb::dict d;
      d["kind"] = component_kind_name(c.kind);
      d["name"] = c.name;
      d["summary"] = c.summary;
      if (!c.backend.empty()) d["backend"] = c.backend;
      components.append(d);
    }
    nb::dict d;
    d["name"] = r.name;
    d["path"] = r.path.string();
    d["version"] = r.version;
    d["summary"] = r.summary;
    d["loaded"] = r.loaded;
    d["refusal"] = r.refusal;
    d["components"] = components;
    out.append(d);
  }
  return out;
}

}  // namespace
}  // namespace duet::python

NB_MODULE(_duet, m) {
  using namespace duet::python;
  m.doc() = "The compiled half of the duet package; use the duet module's API.";
  nb::register_exception_translator(translate);

  nb::class_<Generation>(m, "Generation")
      .def_ro("text", &Generation::text)
      .def_ro("token_ids", &Generation::token_ids)
      .def_ro("prompt_token_ids", &Generation::prompt_token_ids)
      .def_ro("finish_reason", &Generation::finish_reason)
      .def_ro("error", &Generation::error)
      .def_ro("queued_s", &Generation::queued_s)
      .def_ro("first_token_s", &Generation::first_token_s)
      .def_ro("total_s", &Generation::total_s)
      .def_ro("decode_tokens_per_s", &Generation::decode_tokens_per_s)
      .def_ro("cached_prompt_tokens", &Generation::cached_prompt_tokens)
      .def_ro("prompt_logprobs", &Generation::prompt_logprobs)
      .def_prop_ro("logits", &logits_array);

  nb::class_<PyPipeline>(m, "Pipeline")
      .def(nb::init<const std::string&, const std::vector<std::string>&>(), nb::arg("source"),
           nb::arg("overrides"))
      .def("run", &PyPipeline::run, nb::arg("requests"), nb::arg("logits"))
      .def("start", &PyPipeline::start, nb::arg("request"))
      .def("next", &PyPipeline::next, nb::arg("handle"))
      .def("finished", &PyPipeline::finished, nb::arg("handle"))
      .def("cancel", &PyPipeline::cancel, nb::arg("handle"))
      .def("perplexity", &PyPipeline::perplexity, nb::arg("text"), nb::arg("ctx"))
      .def("tokenize", &PyPipeline::tokenize, nb::arg("text"), nb::arg("special"))
      .def("detokenize", &PyPipeline::detokenize, nb::arg("ids"))
      .def_prop_ro("n_vocab", &PyPipeline::n_vocab)
      .def_prop_ro("backend", [](const PyPipeline& p) { return p.pipeline().check().backend; })
      .def_prop_ro("sampler", [](const PyPipeline& p) { return p.pipeline().sampler_order(); })
      .def_prop_ro("kv_cache_bytes",
                   [](const PyPipeline& p) { return p.pipeline().kv_cache_bytes(); })
      .def_prop_ro("describe", [](const PyPipeline& p) { return duet::describe(p.config()); });

  m.def("plugins", &plugin_records);
}
