// `rondel ctl`: the operator's command line for the admin API's runtime operations (drain,
// ready, maint, weight, show a backend), a small blocking HTTP/1.1 client. Not on any loop.
#pragma once

namespace rondel::server {

// Runs `rondel ctl ARGS...` (argv without "rondel ctl"); prints the answer's JSON on stdout
// and returns the exit code: 0 when the admin answered 2xx, 1 when it answered an error (its
// JSON on stderr) or could not be reached, 2 on bad usage.
int run_ctl(int argc, char** argv);

}  // namespace rondel::server
