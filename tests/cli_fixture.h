// cli_fixture.h — a test fixture for running the `duet` binary the build
// made (DUET_BUILD_DIR/bin/duet) as a user would: each test gets a folder
// of its own with the tiny model in it, and a run gives its exit code and
// what it printed.
#pragma once

#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>

#include "tiny_model.h"

namespace duet::testing {

struct CommandResult {
  int code = -1;  // the exit code; 128 + the signal's number when one killed it
  std::string out;
  std::string err;
};

class CliFixture : public ::testing::Test {
 protected:
  // A new folder named after the test, holding tiny.gguf (write_tiny_llama).
  void SetUp() override {
    dir_ = make_temp_dir(::testing::UnitTest::GetInstance()->current_test_info()->name());
    write_tiny_llama(dir_ / "tiny.gguf");
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  // Runs the duet binary with `args` (shell-quoted where needed), standard
  // input from /dev/null or, when given, `input`.
  CommandResult duet(const std::string& args,
                     const std::optional<std::string>& input = std::nullopt) {
    const std::string in = input ? write("stdin", *input) : "/dev/null";
    return shell(std::string(DUET_BUILD_DIR) + "/bin/duet " + args, in);
  }

  // Runs `script` with bash in the test's folder, $DUET the duet binary.
  CommandResult bash(const std::string& script) {
    write("script.sh", script);
    return shell("cd " + dir_.string() + " && DUET=" + DUET_BUILD_DIR + "/bin/duet bash script.sh",
                 "/dev/null");
  }

  // Writes `text` to the file `name` in the test's folder; returns its path.
  std::string write(const std::string& name, const std::string& text) const {
    std::ofstream(dir_ / name, std::ios::binary) << text;
    return (dir_ / name).string();
  }

  static std::string slurp(const std::filesystem::path& p) {
    std::ifstream in(p);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
  }

  std::filesystem::path dir_;

 private:
  CommandResult shell(const std::string& command, const std::string& stdin_path) {
    const std::filesystem::path out = dir_ / "stdout", err = dir_ / "stderr";
    const std::string cmd =
        "{ " + command + "; } >" + out.string() + " 2>" + err.string() + " <" + stdin_path;
    const int status = std::system(cmd.c_str());
    return {WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status), slurp(out),
            slurp(err)};
  }
};

}  // namespace duet::testing
