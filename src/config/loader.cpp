// Loader entry points: read the file, parse YAML, hand the document to the schema reader.

#include "rondel/config/loader.h"

#include <fcntl.h>
#include <unistd.h>
#include <yaml-cpp/yaml.h>

#include <cerrno>
#include <cstring>

#include "config_reader.h"
#include "node_reader.h"

namespace rondel::config {
namespace {

// Larger files are almost certainly a mistake (a log file passed with -f, say).
constexpr size_t kMaxFileBytes = 16u << 20;

// Reads the whole file into `out`; returns 0 or an errno value.
int read_whole_file(const std::string& path, std::string& out) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return errno;
  int err = 0;
  char buf[16384];
  for (;;) {
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n == 0) break;
    if (n < 0) {
      if (errno == EINTR) continue;
      err = errno;
      break;
    }
    out.append(buf, static_cast<size_t>(n));
    if (out.size() > kMaxFileBytes) {
      err = EFBIG;
      break;
    }
  }
  ::close(fd);
  return err;
}

}  // namespace

std::string ConfigError::to_string() const {
  return file + ":" + std::to_string(line) + ":" + std::to_string(column) + ": " + message;
}

LoadResult load_string(std::string_view yaml, const std::string& file) {
  LoadResult result;
  result.config.file = file;
  NodeReader reader(file);
  try {
    const std::vector<YAML::Node> docs = YAML::LoadAll(std::string(yaml));
    if (docs.size() > 1) {
      reader.error(NodeReader::position_of(docs[1]),
                   "a configuration file holds one YAML document; a second one starts here");
    }
    result.config = read_config(docs.empty() ? YAML::Node() : docs[0], reader);
    result.config.file = file;
  } catch (const YAML::Exception& e) {
    // A parse error (bad indentation, an unclosed bracket, a tab): nothing after it is reliable.
    NodeReader failed(file);
    const Position at =
        e.mark.is_null() ? Position{} : Position{e.mark.line + 1, e.mark.column + 1};
    failed.error(at, "invalid YAML: " + e.msg);
    result.errors = failed.take_errors();
    return result;
  }
  result.errors = reader.take_errors();
  return result;
}

LoadResult load_file(const std::string& path) {
  std::string text;
  if (const int err = read_whole_file(path, text); err != 0) {
    LoadResult result;
    result.config.file = path;
    result.errors.push_back(
        ConfigError{path, 0, 0, std::string("cannot read file: ") + std::strerror(err)});
    return result;
  }
  return load_string(text, path);
}

}  // namespace rondel::config
