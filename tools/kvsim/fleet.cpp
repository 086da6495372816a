// Fleet (see fleet.h).
#include "fleet.h"

#include <boost/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "oracle.h"
#include "prompt.h"

namespace kvsim {

// One request between its arrival and its last byte. Freed from its timer's close callback.
struct Fleet::Active {
  Fleet* fleet = nullptr;
  uint64_t id = 0;
  size_t server = 0;
  ApiRequest req;
  Usage usage;
  Started timeline;
  bool running = false;
  uint32_t sent_tokens = 0;
  Connection* conn = nullptr;
  uv_timer_t timer{};
};

Fleet::Fleet(uv_loop_t* loop, Options options)
    : loop_(loop), options_(std::move(options)), start_ns_(uv_hrtime()) {
  servers_.reserve(options_.servers);
  for (uint32_t i = 0; i < options_.servers; ++i) servers_.emplace_back(options_.server);
}

Fleet::~Fleet() = default;

double Fleet::model_now() const {
  return double(uv_hrtime() - start_ns_) / 1e9 * options_.speedup;
}

bool Fleet::listen(std::string& error) {
  auto add = [&](uint32_t port, int endpoint) {
    auto l = std::make_unique<Listener>();
    l->fleet = this;
    l->endpoint = endpoint;
    uv_tcp_init(loop_, &l->tcp);
    l->tcp.data = l.get();
    sockaddr_in addr{};
    int rc = uv_ip4_addr(options_.host.c_str(), static_cast<int>(port), &addr);
    if (rc == 0) rc = uv_tcp_bind(&l->tcp, reinterpret_cast<const sockaddr*>(&addr), 0);
    if (rc == 0) rc = uv_listen(reinterpret_cast<uv_stream_t*>(&l->tcp), 1024, on_connection);
    sockaddr_storage bound{};
    int len = sizeof bound;
    if (rc == 0) rc = uv_tcp_getsockname(&l->tcp, reinterpret_cast<sockaddr*>(&bound), &len);
    listeners_.push_back(std::move(l));
    if (rc != 0) {
      error = options_.host + ":" + std::to_string(port) + ": " + uv_strerror(rc);
      return false;
    }
    int actual = ntohs(reinterpret_cast<sockaddr_in*>(&bound)->sin_port);
    std::printf("%s %s:%d\n", endpoint < 0 ? "oracle" : "listening", options_.host.c_str(), actual);
    if (endpoint >= 0) ports_.push_back(actual);
    return true;
  };
  for (uint32_t i = 0; i < options_.servers; ++i)
    if (!add(options_.port ? options_.port + i : 0, static_cast<int>(i))) return false;
  if ((options_.oracle_port || options_.oracle) && !add(options_.oracle_port, -1)) return false;
  std::fflush(stdout);
  return true;
}

void Fleet::on_connection(uv_stream_t* server, int status) noexcept {
  if (status < 0) return;
  auto* l = static_cast<Listener*>(server->data);
  Connection::accept(server, *l->fleet, l->endpoint, l->fleet->options_.max_body);
}

void Fleet::on_request(Connection& c, HttpRequest request) noexcept {
  std::string_view path = request.target;
  path = path.substr(0, path.find('?'));
  bool chat = path == "/v1/chat/completions";
  if (chat || path == "/v1/completions") {
    if (request.method != "POST") {
      c.send_whole(405, "application/json", "Allow: POST\r\n", error_json("POST only", "invalid_request_error"));
      return;
    }
    handle_completion(c, request, chat);
  } else if (path == "/stats" && request.method == "GET") {
    c.send_whole(200, "application/json", "", stats_json());
  } else if (path == "/health" || path == "/v1/models") {
    c.send_whole(200, "application/json", "", R"({"object":"list","data":[{"id":"kvsim","object":"model"}]})");
  } else {
    c.send_whole(404, "application/json", "", error_json("no such endpoint", "not_found"));
  }
}

void Fleet::handle_completion(Connection& c, const HttpRequest& request, bool chat) noexcept {
  std::string error;
  auto req = parse_api_request(request.body, chat, error);
  if (!req) {
    c.send_whole(400, "application/json", "", error_json(error, "invalid_request_error"));
    return;
  }
  PromptBlocks prompt = hash_prompt(req->prompt_text, options_.seed);
  req->prompt_text.clear();
  size_t server = static_cast<size_t>(c.endpoint());
  if (c.endpoint() < 0) {
    OracleChoice pick =
        oracle_pick(servers_, prompt.chain, prompt.tokens, model_now(), options_.oracle_params);
    server = pick.server;
    ++oracle_requests_;
    oracle_spills_ += pick.spilled ? 1 : 0;
  }
  auto* a = new Active;
  a->fleet = this;
  a->id = ++next_id_;
  a->server = server;
  a->req = std::move(*req);
  a->usage.prompt_tokens = prompt.tokens;
  a->usage.completion_tokens = a->req.max_tokens ? a->req.max_tokens : options_.default_max_tokens;
  a->usage.completion_tokens = std::max<uint32_t>(a->usage.completion_tokens, 1);
  a->conn = &c;
  uv_timer_init(loop_, &a->timer);
  a->timer.data = a;
  started_scratch_.clear();
  Job job{a->id, std::move(prompt.chain), prompt.tokens, a->usage.completion_tokens};
  if (!servers_[server].submit(std::move(job), model_now(), started_scratch_)) {
    ++rejected_;
    c.send_whole(400, "application/json", "",
                 error_json("prompt and max_tokens need more KV blocks than the server has",
                            "invalid_request_error"));
    uv_close(reinterpret_cast<uv_handle_t*>(&a->timer),
             [](uv_handle_t* h) { delete static_cast<Active*>(h->data); });
    return;
  }
  c.active = a;
  active_.emplace(a->id, a);
  if (a->req.stream) c.start_stream(orca_header(server));
  start(started_scratch_);
}

void Fleet::start(const std::vector<Started>& started) {
  for (const Started& s : started) {
    auto it = active_.find(s.id);
    if (it == active_.end()) continue;
    Active& a = *it->second;
    a.timeline = s;
    a.running = true;
    a.usage.cached_tokens = s.cached_tokens;
    arm(a, a.req.stream ? s.first_token_at : s.finish_at);
  }
}

void Fleet::arm(Active& a, double at) {
  double ms = std::max(0.0, (at - model_now()) / options_.speedup * 1000.0);
  uv_timer_start(&a.timer, on_timer, static_cast<uint64_t>(std::ceil(ms)), 0);
}

void Fleet::on_timer(uv_timer_t* t) noexcept {
  auto* a = static_cast<Active*>(t->data);
  a->fleet->tick(*a);
}

void Fleet::tick(Active& a) {
  double now = model_now();
  uint32_t total = a.usage.completion_tokens;
  if (!a.req.stream || now + 1e-9 >= a.timeline.finish_at) {
    complete(a);
    return;
  }
  // Token i (1-based) is out at prefill end + i x d.
  double d = options_.server.time.d;
  double prefill_end = a.timeline.first_token_at - d;
  uint32_t out = d > 0 ? static_cast<uint32_t>(std::floor((now - prefill_end) / d + 1e-9)) : total;
  out = std::clamp<uint32_t>(out, 1, total - 1);
  if (out > a.sent_tokens && a.conn) {
    a.conn->send_event(chunk_event(a.req, a.id, output_text(options_.seed, a.id, a.sent_tokens, out), nullptr));
    a.sent_tokens = out;
  }
  double next = now + options_.chunk_ms / 1000.0 * options_.speedup;
  arm(a, std::min(next, a.timeline.finish_at));
}

void Fleet::complete(Active& a) {
  uint32_t total = a.usage.completion_tokens;
  if (a.conn) {
    std::string text = output_text(options_.seed, a.id, a.sent_tokens, total);
    if (a.req.stream) {
      a.conn->send_event(chunk_event(a.req, a.id, text, &a.usage));
      a.conn->send_event("data: [DONE]\n\n");
      a.conn->end_stream();
    } else {
      a.conn->send_whole(200, "application/json", orca_header(a.server),
                         answer_json(a.req, a.id, text, a.usage));
    }
  }
  started_scratch_.clear();
  servers_[a.server].finish(a.id, a.timeline.finish_at, started_scratch_);
  active_.erase(a.id);
  uv_close(reinterpret_cast<uv_handle_t*>(&a.timer),
           [](uv_handle_t* h) { delete static_cast<Active*>(h->data); });
  start(started_scratch_);
}

void Fleet::on_closed(Connection& c) noexcept {
  // The client left: the request runs on in the model (its blocks stay pinned until its end,
  // as a server that has not noticed yet), its answer goes nowhere.
  if (c.active) static_cast<Active*>(c.active)->conn = nullptr;
}

std::string Fleet::orca_header(size_t server) const {
  if (!options_.orca) return {};
  const ServerModel& s = servers_[server];
  char line[160];
  std::snprintf(line, sizeof line,
                "endpoint-load-metrics: TEXT named_metrics.kv_cache_utilization=%.4f,"
                "named_metrics.num_requests_waiting=%zu\r\n",
                double(s.cache().in_use()) / s.cache().capacity(), s.waiting());
  return line;
}

std::string Fleet::stats_json() const {
  namespace json = boost::json;
  double now = model_now();
  json::array list;
  uint64_t prompt = 0, cached = 0, requests = 0, output = 0;
  for (size_t i = 0; i < servers_.size(); ++i) {
    const ServerModel& s = servers_[i];
    const auto& t = s.totals();
    prompt += t.prompt_tokens;
    cached += t.cached_tokens;
    requests += t.requests;
    output += t.output_tokens;
    list.push_back(json::object{
        {"port", i < ports_.size() ? ports_[i] : 0},
        {"requests", t.requests},
        {"prompt_tokens", t.prompt_tokens},
        {"cached_tokens", t.cached_tokens},
        {"hit_rate", t.prompt_tokens ? double(t.cached_tokens) / t.prompt_tokens : 0.0},
        {"output_tokens", t.output_tokens},
        {"kv_capacity_blocks", s.cache().capacity()},
        {"kv_in_use_blocks", s.cache().in_use()},
        {"kv_hashed_blocks", s.cache().hashed()},
        {"kv_evictions", s.cache().evictions()},
        {"kv_use", double(s.cache().in_use()) / s.cache().capacity()},
        {"kv_use_mean", s.kv_use_mean(now)},
        {"kv_use_max", t.kv_use_max},
        {"running", s.running()},
        {"waiting", s.waiting()},
        {"max_waiting", t.max_waiting},
    });
  }
  json::object total{{"requests", requests},
                     {"prompt_tokens", prompt},
                     {"cached_tokens", cached},
                     {"hit_rate", prompt ? double(cached) / prompt : 0.0},
                     {"output_tokens", output},
                     {"rejected", rejected_}};
  json::object oracle{{"requests", oracle_requests_}, {"spills", oracle_spills_}};
  return json::serialize(json::object{{"model_time", now},
                                      {"speedup", options_.speedup},
                                      {"servers", std::move(list)},
                                      {"total", std::move(total)},
                                      {"oracle", std::move(oracle)}});
}

}  // namespace kvsim
