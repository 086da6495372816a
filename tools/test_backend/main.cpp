// rondel-test-backend: a single-threaded libuv HTTP/1.1 backend for rondel's integration tests,
// demo and benchmarks, with configurable delays, body sizes, failures and a cache model.
#include <uv.h>

#include <csignal>
#include <cstdio>

#include "backend.h"
#include "options.h"

int main(int argc, char** argv) {
  using namespace rondel::test_backend;
  auto options = parse_options(argc, argv);
  if (!options) {
    std::fprintf(stderr, "rondel-test-backend: %s\n%.*s", options.error().message.c_str(),
                 static_cast<int>(usage().size()), usage().data());
    return 2;
  }
  if (options->help) {
    std::fwrite(usage().data(), 1, usage().size(), stdout);
    return 0;
  }
  std::signal(SIGPIPE, SIG_IGN);  // A client that vanished must not kill the backend.

  uv_loop_t loop;
  uv_loop_init(&loop);
  int rc = 0;
  {
    Backend backend(&loop, std::move(*options));
    auto address = backend.start();
    if (!address) {
      std::fprintf(stderr, "rondel-test-backend: %s\n", address.error().message.c_str());
      backend.stop();
      rc = 1;
    } else {
      std::printf("listening %s\n", address->c_str());
      std::fflush(stdout);
    }
    uv_run(&loop, UV_RUN_DEFAULT);
  }
  if (uv_loop_close(&loop) != 0) {
    std::fprintf(stderr, "rondel-test-backend: handles left open at exit\n");
    return rc == 0 ? 1 : rc;
  }
  return rc;
}
