#include "subprocess.h"

#include <fcntl.h>
#include <poll.h>
#include <spawn.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstring>
#include <filesystem>

#include "duet/error.h"

extern char** environ;

namespace duet::compare {
namespace {

// Closes a file descriptor when it goes out of scope.
struct Fd {
  int fd = -1;
  ~Fd() {
    if (fd >= 0) close(fd);
  }
};

[[noreturn]] void fail(const std::string& what) {
  throw Error(ErrorKind::kInternal,
              "cannot run a child process: " + what + ": " + std::strerror(errno));
}

// Reads the child's standard output and error into `r` until both close.
void read_until_closed(int out_fd, int err_fd, ChildResult& r) {
  pollfd fds[2] = {{out_fd, POLLIN, 0}, {err_fd, POLLIN, 0}};
  std::string* sinks[2] = {&r.out, &r.err};
  int open_fds = 2;
  char buffer[1 << 16];
  while (open_fds > 0) {
    if (poll(fds, 2, -1) < 0) {
      if (errno == EINTR) continue;
      fail("poll");
    }
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd < 0 || fds[i].revents == 0) continue;
      const ssize_t n = read(fds[i].fd, buffer, sizeof buffer);
      if (n > 0) {
        sinks[i]->append(buffer, static_cast<size_t>(n));
      } else if (n == 0 || errno != EINTR) {
        fds[i].fd = -1;  // closed (the Fd guards close it)
        --open_fds;
      }
    }
  }
}

}  // namespace

std::string ChildResult::status() const {
  if (signal != 0)
    return "killed by signal " + std::to_string(signal) + " (" + strsignal(signal) + ")";
  return "exit code " + std::to_string(exit_code);
}

std::string ChildResult::reason() const {
  size_t end = err.find_last_not_of(" \n\r\t");
  if (end == std::string::npos) return status();
  size_t begin = err.rfind('\n', end);
  begin = begin == std::string::npos ? 0 : begin + 1;
  return err.substr(begin, end - begin + 1);
}

std::string self_executable() {
  std::error_code ec;
  const auto path = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (ec) throw Error(ErrorKind::kInternal, "cannot find the running executable: " + ec.message());
  return path.string();
}

ChildResult run_child(const std::vector<std::string>& argv) {
  int out_pipe[2], err_pipe[2];
  if (pipe2(out_pipe, O_CLOEXEC) != 0) fail("pipe");
  Fd out_read{out_pipe[0]}, out_write{out_pipe[1]};
  if (pipe2(err_pipe, O_CLOEXEC) != 0) fail("pipe");
  Fd err_read{err_pipe[0]}, err_write{err_pipe[1]};

  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&actions, out_write.fd, STDOUT_FILENO);
  posix_spawn_file_actions_adddup2(&actions, err_write.fd, STDERR_FILENO);
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  // In a process group of its own, so that Ctrl-C at the terminal reaches
  // only the parent, which then lets the running child finish.
  posix_spawnattr_t attributes;
  posix_spawnattr_init(&attributes);
  posix_spawnattr_setflags(&attributes, POSIX_SPAWN_SETPGROUP);
  posix_spawnattr_setpgroup(&attributes, 0);
  pid_t pid = 0;
  const int spawned = posix_spawnp(&pid, args[0], &actions, &attributes, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attributes);
  if (spawned != 0) {
    errno = spawned;
    fail("spawn " + argv[0]);
  }
  close(out_write.fd);
  out_write.fd = -1;
  close(err_write.fd);
  err_write.fd = -1;

  ChildResult r;
  try {
    read_until_closed(out_read.fd, err_read.fd, r);
  } catch (...) {
    kill(pid, SIGKILL);  // never leave a child behind
    waitpid(pid, nullptr, 0);
    throw;
  }
  int status = 0;
  rusage usage{};
  while (wait4(pid, &status, 0, &usage) < 0) {
    if (errno != EINTR) fail("wait");
  }
  r.peak_rss_bytes = static_cast<uint64_t>(usage.ru_maxrss) * 1024;  // kilobytes on Linux
  if (WIFEXITED(status)) {
    r.exit_code = WEXITSTATUS(status);
  } else if (WIFSIGNALED(status)) {
    r.signal = WTERMSIG(status);
  }
  return r;
}

}  // namespace duet::compare
