// duet/generation.h — what every decode-loop stage does with a token it has
// chosen: append it, count it, stream its text, and stop where it should.
//
// The built-in decode stage and stage plugins (plugins/speculative) share
// this, so they stop at the same token and stream the same text:
//   Generation out(session, stop);
//   while (...) { if (!out.add(session.sample())) break; ...; session.forward(...); }
// A stage that verifies draft tokens confirms those it keeps instead.
//   out.finish();
// Text is sent to the session's sink as soon as it can no longer be the
// start of a stop string, and never splits a UTF-8 character.
// Thread-safety: none; one Generation per session turn.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "duet/export.h"
#include "duet/session.h"

namespace duet {

// Throws duet::Error(kConfig) naming `path` (e.g. "stages[2].decode.stop")
// for an empty stop string (it would stop at once) or one that is not valid
// UTF-8 text (text is streamed a whole character at a time).
DUET_API void check_stop_strings(const std::vector<std::string>& stop, const std::string& path);

class DUET_API Generation {
 public:
  // REQUIRES: `stop` passed check_stop_strings. Keeps a reference to
  // `session`, which must outlive this object.
  Generation(Session& session, std::vector<std::string> stop);
  ~Generation();
  Generation(const Generation&) = delete;
  Generation& operator=(const Generation&) = delete;

  // Appends `token` to the session (Session::append: not yet cached), then
  // counts and streams it as confirm() does. Returns what confirm() returns.
  bool add(int32_t token);

  // Counts tokens()[position] as generated — stats().generated_tokens (the
  // first one also sets first_token_seconds) — and streams its text: for a
  // token the stage appended itself before running it, such as a draft
  // token a verifying forward confirmed. Returns false when the generation
  // has ended: the token is an end-of-generation token, or its text
  // completed a stop string (the text before the stop string is sent, the
  // rest is dropped); the session's finish reason is then kStop, and tokens
  // after `position` are the stage's to truncate(). Returns true otherwise;
  // max_new_tokens and room() are the stage's to check. REQUIRES: position
  // is the one after the last token added or confirmed (the first is
  // tokens().size() at construction); else duet::Error(kPlugin).
  bool confirm(int32_t position);

  // Ends the turn: sets the finish reason to kLength if none is set yet,
  // sends text still held back (unless a stop string ended it) and records
  // stats().decode_seconds. Call once, after the last add().
  void finish();

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace duet
