// Loader entry points: read the file, parse YAML, hand the document to the schema reader.

#include "rondel/config/loader.h"

#include <fcntl.h>
#include <unistd.h>
#include <yaml-cpp/eventhandler.h>
#include <yaml-cpp/yaml.h>

#include <cerrno>
#include <cstring>
#include <sstream>
#include <string>

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

// Counts document starts and remembers where the second one begins; ignores everything else.
class DocumentCounter : public YAML::EventHandler {
 public:
  int documents = 0;
  YAML::Mark second;
  void OnDocumentStart(const YAML::Mark& mark) override {
    if (++documents == 2) second = mark;
  }
  void OnDocumentEnd() override {}
  void OnNull(const YAML::Mark&, YAML::anchor_t) override {}
  void OnAlias(const YAML::Mark&, YAML::anchor_t) override {}
  void OnScalar(const YAML::Mark&, const std::string&, YAML::anchor_t,
                const std::string&) override {}
  void OnSequenceStart(const YAML::Mark&, const std::string&, YAML::anchor_t,
                       YAML::EmitterStyle::value) override {}
  void OnSequenceEnd() override {}
  void OnMapStart(const YAML::Mark&, const std::string&, YAML::anchor_t,
                  YAML::EmitterStyle::value) override {}
  void OnMapEnd() override {}
};

}  // namespace

std::string ConfigError::to_string() const {
  return file + ":" + std::to_string(line) + ":" + std::to_string(column) + ": " + message;
}

LoadResult load_string(std::string_view yaml, const std::string& file) {
  LoadResult result;
  result.config.file = file;
  NodeReader reader(file);
  try {
    // Not YAML::LoadAll: in yaml-cpp 0.7 it loops forever on some malformed input (found by
    // the config fuzzer, tests/fuzz/corpus/config/yaml_cpp_loadall_hang.yaml). Load the first
    // document, then ask the parser at most twice whether a second one follows.
    const std::string text(yaml);
    const YAML::Node doc = YAML::Load(text);
    {
      std::istringstream in(text);
      YAML::Parser parser(in);
      DocumentCounter counter;
      if (parser.HandleNextDocument(counter) && parser.HandleNextDocument(counter) &&
          counter.documents > 1) {
        reader.error(Position{static_cast<int>(counter.second.line) + 1,
                              static_cast<int>(counter.second.column) + 1},
                     "a configuration file holds one YAML document; a second one starts here");
      }
    }
    result.config = read_config(doc, reader);
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
