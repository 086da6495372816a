// rondel-test-backend: a single-threaded libuv HTTP/1.1 backend for rondel's integration tests,
// demo and benchmarks, with configurable delays, body sizes, failures and a cache model.
//
// "--and" separates the options of several backends served by this one process and its one event
// loop ("--listen A --name b1 --and --listen B --name b2"): each has its own listener, name,
// counters and ledger. The benchmark uses it to keep the client core's process count low.
#include <uv.h>

#include <csignal>
#include <cstdio>
#include <list>
#include <string_view>
#include <vector>

#include "backend.h"
#include "options.h"

int main(int argc, char** argv) {
  using namespace rondel::test_backend;
  std::vector<Options> all;
  for (int first = 1; first <= argc;) {
    int last = first;
    while (last < argc && std::string_view(argv[last]) != "--and") ++last;
    if (last == first && argc > 1) {  // "--and" first, last or twice in a row
      std::fprintf(stderr, "rondel-test-backend: --and needs a backend's options on both sides\n");
      return 2;
    }
    // parse_options skips its argv[0]: hand it the word before this group.
    auto options = parse_options(last - first + 1, argv + first - 1);
    if (!options) {
      std::fprintf(stderr, "rondel-test-backend: %s\n%.*s", options.error().message.c_str(),
                   static_cast<int>(usage().size()), usage().data());
      return 2;
    }
    if (options->help) {
      std::fwrite(usage().data(), 1, usage().size(), stdout);
      return 0;
    }
    all.push_back(std::move(*options));
    first = last + 1;
  }
  std::signal(SIGPIPE, SIG_IGN);  // A client that vanished must not kill the backend.

  uv_loop_t loop;
  uv_loop_init(&loop);
  int rc = 0;
  {
    std::list<Backend> backends;  // Backend is neither copyable nor movable.
    for (auto& options : all) {
      Backend& backend = backends.emplace_back(&loop, std::move(options));
      auto address = backend.start();
      if (!address) {
        std::fprintf(stderr, "rondel-test-backend: %s\n", address.error().message.c_str());
        for (auto& b : backends) b.stop();
        rc = 1;
        break;
      }
      std::printf("listening %s\n", address->c_str());
    }
    std::fflush(stdout);
    uv_run(&loop, UV_RUN_DEFAULT);
  }
  if (uv_loop_close(&loop) != 0) {
    std::fprintf(stderr, "rondel-test-backend: handles left open at exit\n");
    return rc == 0 ? 1 : rc;
  }
  return rc;
}
