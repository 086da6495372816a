// kvsim: simulated OpenAI-compatible inference servers with a KV-cache model (tools/kvsim,
// docs/benchmarks.md "Inference routing"). Runs until SIGINT or SIGTERM.
#include <uv.h>

#include <csignal>
#include <cstdio>
#include <string>

#include "fleet.h"
#include "options.h"

namespace {

void on_signal(uv_signal_t* s, int) noexcept {
  auto* fleet = static_cast<kvsim::Fleet*>(s->data);
  std::printf("%s\n", fleet->stats_json().c_str());
  std::fflush(stdout);
  std::_Exit(0);  // connections and timers in flight die with the process
}

}  // namespace

int main(int argc, char** argv) {
  std::string error;
  auto options = kvsim::parse_options(argc, argv, error);
  if (!options) {
    std::fprintf(stderr, "kvsim: %s\n%s", error.c_str(), kvsim::usage().c_str());
    return 2;
  }
  if (options->help) {
    std::fputs(kvsim::usage().c_str(), stdout);
    return 0;
  }
  std::signal(SIGPIPE, SIG_IGN);
  uv_loop_t* loop = uv_default_loop();
  kvsim::Fleet fleet(loop, *options);
  if (!fleet.listen(error)) {
    std::fprintf(stderr, "kvsim: %s\n", error.c_str());
    return 1;
  }
  uv_signal_t sigterm, sigint;
  for (auto [handle, signum] : {std::pair{&sigterm, SIGTERM}, std::pair{&sigint, SIGINT}}) {
    uv_signal_init(loop, handle);
    handle->data = &fleet;
    uv_signal_start(handle, on_signal, signum);
  }
  std::printf("ready\n");
  std::fflush(stdout);
  return uv_run(loop, UV_RUN_DEFAULT);
}
