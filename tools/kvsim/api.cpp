// Request parsing and answer writing with Boost.JSON (see api.h).
#include "api.h"

#include <boost/json.hpp>

#include "prompt.h"

namespace kvsim {
namespace json = boost::json;

namespace {

std::string content_text(const json::value& content) {
  if (content.is_string()) return std::string(content.as_string());
  std::string out;
  if (content.is_array()) {
    for (const auto& part : content.as_array()) {
      const json::object* o = part.if_object();
      const json::value* text = o ? o->if_contains("text") : nullptr;
      if (text && text->is_string()) out += text->as_string();
      else out += json::serialize(part);
    }
  } else if (!content.is_null()) {
    out = json::serialize(content);
  }
  return out;
}

bool read_common(const json::object& o, ApiRequest& r, std::string& error) {
  if (const auto* v = o.if_contains("stream")) r.stream = v->is_bool() && v->as_bool();
  if (const auto* v = o.if_contains("model"); v && v->is_string()) r.model = v->as_string();
  for (const char* key : {"max_tokens", "max_completion_tokens"}) {
    const auto* v = o.if_contains(key);
    if (!v || v->is_null()) continue;
    if (!v->is_int64() || v->as_int64() < 0 || v->as_int64() > 1000000) {
      error = std::string(key) + " must be an integer from 0 to 1000000";
      return false;
    }
    r.max_tokens = static_cast<uint32_t>(v->as_int64());
  }
  return true;
}

}  // namespace

std::optional<ApiRequest> parse_api_request(std::string_view body, bool chat, std::string& error) {
  json::error_code ec;
  json::value v = json::parse(body, ec);
  if (ec || !v.is_object()) {
    error = ec ? "body is not JSON: " + ec.message() : "body is not a JSON object";
    return std::nullopt;
  }
  const json::object& o = v.as_object();
  ApiRequest r;
  r.chat = chat;
  if (!read_common(o, r, error)) return std::nullopt;
  if (chat) {
    const auto* messages = o.if_contains("messages");
    if (!messages || !messages->is_array() || messages->as_array().empty()) {
      error = "messages must be a non-empty array";
      return std::nullopt;
    }
    std::vector<ChatMessage> list;
    for (const auto& m : messages->as_array()) {
      const json::object* mo = m.if_object();
      const json::value* role = mo ? mo->if_contains("role") : nullptr;
      if (!role || !role->is_string()) {
        error = "each message needs a string role";
        return std::nullopt;
      }
      const json::value* content = mo->if_contains("content");
      list.push_back({std::string(role->as_string()), content ? content_text(*content) : ""});
    }
    r.prompt_text = render_chat(list);
  } else {
    const auto* prompt = o.if_contains("prompt");
    if (!prompt || !(prompt->is_string() || prompt->is_array())) {
      error = "prompt must be a string or an array of strings";
      return std::nullopt;
    }
    r.prompt_text = content_text(*prompt);
  }
  return r;
}

std::string output_text(uint64_t seed, uint64_t id, uint32_t from, uint32_t to) {
  static constexpr const char* kWords[] = {" the", " kv ", " and", " of ", " pre", "fix ",
                                           " to ", " a  ", " hit", " is ", " it ", " on "};
  std::string out;
  out.reserve((to - from) * kBytesPerToken);
  for (uint32_t i = from; i < to; ++i) {
    uint64_t x = (seed ^ (id * 0x9e3779b97f4a7c15ull)) + i * 0xbf58476d1ce4e5b9ull;
    x ^= x >> 31;
    out += kWords[x % std::size(kWords)];
  }
  return out;
}

namespace {

json::object usage_json(const Usage& u) {
  return json::object{{"prompt_tokens", u.prompt_tokens},
                      {"completion_tokens", u.completion_tokens},
                      {"total_tokens", u.prompt_tokens + u.completion_tokens},
                      {"prompt_tokens_details", json::object{{"cached_tokens", u.cached_tokens}}}};
}

json::object envelope(const ApiRequest& req, uint64_t id, bool chunk) {
  std::string prefix = req.chat ? "chatcmpl-" : "cmpl-";
  const char* object = req.chat ? (chunk ? "chat.completion.chunk" : "chat.completion")
                                : "text_completion";
  return json::object{{"id", prefix + std::to_string(id)}, {"object", object},
                      {"created", 0}, {"model", req.model}};
}

}  // namespace

std::string answer_json(const ApiRequest& req, uint64_t id, std::string_view text, const Usage& usage) {
  json::object o = envelope(req, id, false);
  json::object choice{{"index", 0}, {"finish_reason", "length"}};
  if (req.chat) choice["message"] = json::object{{"role", "assistant"}, {"content", text}};
  else choice["text"] = text;
  o["choices"] = json::array{choice};
  o["usage"] = usage_json(usage);
  return json::serialize(o);
}

std::string chunk_event(const ApiRequest& req, uint64_t id, std::string_view text, const Usage* finish) {
  json::object o = envelope(req, id, true);
  json::object choice{{"index", 0}};
  if (req.chat) choice["delta"] = json::object{{"content", text}};
  else choice["text"] = text;
  choice["finish_reason"] = finish ? json::value("length") : json::value(nullptr);
  o["choices"] = json::array{choice};
  if (finish) o["usage"] = usage_json(*finish);
  return "data: " + json::serialize(o) + "\n\n";
}

std::string error_json(std::string_view message, std::string_view type) {
  return json::serialize(json::object{
      {"error", json::object{{"message", message}, {"type", type}}}});
}

}  // namespace kvsim
