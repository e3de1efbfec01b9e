// named_call.h — a call into a plugin's component whose failure comes back
// naming the component (internal to core).
#pragma once

#include <exception>
#include <new>
#include <string>

#include "duet/error.h"

namespace duet {

// Runs `call` and returns what it returns. What it throws comes back as a
// duet::Error whose message starts with `label` (e.g. "sampler 'top_k'
// (plugin 'samplers', components.sampler.chain[2])"): a duet::Error keeps
// its kind ("LABEL: MESSAGE"); std::bad_alloc passes as it is (out of
// memory, exit code 5); anything else — `throw 42` included — becomes
// kPlugin ("LABEL failed: MESSAGE").
template <typename Call>
auto call_named(const std::string& label, Call&& call) -> decltype(call()) {
  try {
    return call();
  } catch (const Error& e) {
    throw Error(e.kind(), label + ": " + e.what());
  } catch (const std::bad_alloc&) {
    throw;
  } catch (const std::exception& e) {
    throw Error(ErrorKind::kPlugin, label + " failed: " + e.what());
  } catch (...) {
    throw Error(ErrorKind::kPlugin,
                label + " failed: it threw something that is not a std::exception");
  }
}

}  // namespace duet
