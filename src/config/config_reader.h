// ConfigReader: the rondel schema, mapping a parsed YAML document onto Config field by field.
//
// Internal to src/config/. It knows every key, its type, default and range, and the checks
// that span several entries (unique names, ids and binds; listeners naming existing pools).
#pragma once

#include <yaml-cpp/yaml.h>

#include "node_reader.h"
#include "rondel/config/config.h"

namespace rondel::config {

// Reads `root` (the file's only document; a null node for an empty file) into a Config,
// recording every problem in `reader`. The result is meaningful only if no error was recorded.
Config read_config(const YAML::Node& root, NodeReader& reader);

}  // namespace rondel::config
