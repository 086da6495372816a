// rondel: entry point. `rondel -f FILE` serves; `rondel -c -f FILE` checks a configuration.
#include <csignal>
#include <cstdio>
#include <cstring>
#include <string>

#include "rondel/config/loader.h"
#include "rondel/server/daemon.h"

#ifndef RONDEL_VERSION
#define RONDEL_VERSION "unknown"
#endif

namespace {

void usage(FILE* to) {
  std::fputs(
      "usage: rondel -f FILE        serve with the configuration in FILE\n"
      "       rondel -c -f FILE     check FILE: prints OK (exit 0) or every error (exit 1)\n"
      "       rondel -v | -V | --version   print the version\n"
      "signals: SIGHUP reloads FILE, SIGTERM/SIGINT drain and exit, SIGUSR1 reopens logs\n",
      to);
}

}  // namespace

int main(int argc, char** argv) {
  std::string file;
  bool check = false;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if ((a == "-f" || a == "--config") && i + 1 < argc) {
      file = argv[++i];
    } else if (a == "-c" || a == "--check") {
      check = true;
    } else if (a == "-h" || a == "--help") {
      usage(stdout);
      return 0;
    } else if (a == "-v" || a == "-V" || a == "--version") {
      // -v and -V as HAProxy and nginx operators type them.
      std::puts("rondel " RONDEL_VERSION);
      return 0;
    } else {
      std::fprintf(stderr, "rondel: unknown argument '%s'\n", a.c_str());
      usage(stderr);
      return 2;
    }
  }
  if (file.empty()) {
    usage(stderr);
    return 2;
  }
  rondel::config::LoadResult lr = rondel::config::load_file(file);
  if (!lr.ok()) {
    for (const auto& e : lr.errors) std::fprintf(stderr, "%s\n", e.to_string().c_str());
    std::fprintf(stderr, "rondel: %zu error(s) in %s\n", lr.errors.size(), file.c_str());
    return check ? 1 : 2;
  }
  if (check) {
    std::puts("OK");
    return 0;
  }
  std::signal(SIGPIPE, SIG_IGN);
  rondel::server::Daemon daemon(file);
  if (!daemon.start(std::move(lr.config))) return 2;
  return daemon.run();
}
