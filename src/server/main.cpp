// rondel: entry point. `rondel -f FILE` serves; `rondel -c -f FILE` checks a configuration;
// `rondel -c -f NEW --diff-against OLD [--json]` previews how much of the key space a reload
// from OLD to NEW would move.
#include <csignal>
#include <cstdio>
#include <cstring>
#include <string>

#include "rondel/config/loader.h"
#include "rondel/server/admin_checks.h"
#include "rondel/server/ctl.h"
#include "rondel/server/config_diff.h"
#include "rondel/server/daemon.h"
#include "rondel/tls/server_context.h"
#include "rondel/server/discovery.h"

#ifndef RONDEL_VERSION
#define RONDEL_VERSION "unknown"
#endif

namespace {

void usage(FILE* to) {
  std::fputs(
      "usage: rondel -f FILE        serve with the configuration in FILE\n"
      "       rondel -c -f FILE     check FILE: prints OK (exit 0) or every error (exit 1)\n"
      "       rondel ctl ...        drain / ready / maint / weight a backend (rondel ctl -h)\n"
      "       rondel -c -f NEW --diff-against OLD [--json]\n"
      "                             check NEW, then print per pool the share of the key space\n"
      "                             a reload from OLD would move (exit 0; 1 if a file is bad)\n"
      "       rondel -v | -V | --version   print the version\n"
      "signals: SIGHUP reloads FILE, SIGTERM/SIGINT drain and exit, SIGUSR1 reopens logs\n",
      to);
}

// Prints the reload dry-run from `old_file` to the checked configuration `next`.
int diff_against(const rondel::config::Config& next, const std::string& old_file, bool json) {
  rondel::config::LoadResult prev = rondel::config::load_file(old_file);
  if (!prev.ok()) {
    for (const auto& e : prev.errors) std::fprintf(stderr, "%s\n", e.to_string().c_str());
    std::fprintf(stderr, "rondel: %zu error(s) in %s\n", prev.errors.size(), old_file.c_str());
    return 1;
  }
  auto diffs = rondel::server::diff_configs(prev.config, next);
  if (!diffs) {
    std::fprintf(stderr, "rondel: %s\n", diffs.error().message.c_str());
    return 1;
  }
  const std::string out =
      json ? rondel::server::diff_json(*diffs) : "OK\n" + rondel::server::diff_text(*diffs);
  std::fputs(out.c_str(), stdout);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc >= 2 && std::strcmp(argv[1], "ctl") == 0) return rondel::server::run_ctl(argc - 2, argv + 2);
  std::string file;
  bool check = false;
  bool json = false;
  std::string diff_file;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if ((a == "-f" || a == "--config") && i + 1 < argc) {
      file = argv[++i];
    } else if (a == "-c" || a == "--check") {
      check = true;
    } else if (a == "--diff-against" && i + 1 < argc) {
      diff_file = argv[++i];
    } else if (a == "--json") {
      json = true;
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
  if (file.empty() || (!check && (!diff_file.empty() || json))) {
    usage(stderr);
    return 2;
  }
  rondel::config::LoadResult lr = rondel::config::load_file(file);
  if (!lr.ok()) {
    for (const auto& e : lr.errors) std::fprintf(stderr, "%s\n", e.to_string().c_str());
    std::fprintf(stderr, "rondel: %zu error(s) in %s\n", lr.errors.size(), file.c_str());
    return check ? 1 : 2;
  }
  if (check && !diff_file.empty()) return diff_against(lr.config, diff_file, json);
  if (check) {
    // TLS certificates are loaded as a start would load them (match, expiry), each reported.
    if (!rondel::tls::check_certificates(lr.config, stdout, stderr)) return 1;
    // What a start would warn about the admin section, state file included: still OK.
    for (const auto& w : rondel::server::check_admin(lr.config)) {
      std::fprintf(stderr, "rondel: warning: %s\n", w.text.c_str());
    }
    // Discovery and fleet files (CA bundles, tokens), read as a start would; no source is asked.
    if (!rondel::server::check_discovery_files(lr.config, stderr)) return 1;
    std::puts("OK");
    return 0;
  }
  std::signal(SIGPIPE, SIG_IGN);
  rondel::server::Daemon daemon(file);
  if (!daemon.start(std::move(lr.config))) return 2;
  return daemon.run();
}
