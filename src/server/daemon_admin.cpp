// Daemon, the operator's side: the admin listener and its warnings, the admin token, the admin
// state file, and a runtime change of a backend's admin state or weight
// (PUT /api/pools/{pool}/backends/{id}, rondel ctl).
#include <algorithm>
#include <fstream>
#include <sstream>

#include "rondel/server/admin.h"
#include "rondel/server/admin_checks.h"
#include "rondel/server/daemon.h"
#include "rondel/server/metrics.h"

namespace rondel::server {

core::Result<bool> Daemon::read_admin_token(const config::Config& cfg) {
  admin_token_.clear();
  const std::string& path = cfg.admin.token_file;
  if (path.empty()) return false;
  std::ifstream in(path);
  if (!in) return core::fail(path + ": cannot be read");
  std::ostringstream text;
  text << in.rdbuf();
  std::string token = text.str();
  while (!token.empty() && (token.back() == '\n' || token.back() == '\r' ||
                            token.back() == ' ' || token.back() == '\t')) {
    token.pop_back();
  }
  if (token.empty()) return core::fail(path + ": the token file is empty");
  admin_token_ = std::move(token);
  return true;
}

bool Daemon::open_admin(const config::Config& cfg) {
  for (const AdminWarning& w : admin_setup_warnings(cfg.admin)) {
    log_.log(proxy::Level::kWarn, w.event, w.text);
  }
  if (!cfg.admin.enabled) return true;
  metrics_ = std::make_unique<Metrics>(*this);
  metrics_->set_snapshot(worker_->snapshot());
  worker_->on_exchange = &Metrics::on_exchange;
  worker_->on_exchange_ctx = metrics_->exchange_context(0);
  for (auto& t : threads_) {
    t->set_exchange_hook(&Metrics::on_exchange, metrics_->exchange_context(t->id()));
  }
  admin_ = std::make_unique<Admin>(*this);
  configure_admin(cfg.admin);
  auto ok = admin_->open(cfg.admin.bind);
  if (!ok) {
    log_.log(proxy::Level::kError, "admin_bind_failed", ok.error().message);
    return false;
  }
  admin_bind_ = cfg.admin.bind.to_string();
  log_.log(proxy::Level::kInfo, "admin_listening",
           "addr=" + cfg.admin.bind.host + ":" + std::to_string(admin_->port()));
  return true;
}

void Daemon::configure_admin(const config::AdminConfig& admin) {
  if (!admin_) return;
  if (std::string lowered = admin_->configure(admin); !lowered.empty()) {
    log_.log(proxy::Level::kWarn, "admin_max_connections_lowered", lowered);
  }
}

void Daemon::load_admin_states(const config::Config& cfg) {
  const std::string& path = cfg.admin.state_file;
  if (path.empty()) return;
  std::vector<std::string> warnings;
  auto ok = admin_states_.load(path, warnings);
  for (const auto& w : warnings) log_.log(proxy::Level::kWarn, "admin_state_skipped", w);
  if (!ok) {
    log_.log(proxy::Level::kError, "admin_state_unreadable", ok.error().message);
    return;
  }
  log_.log(proxy::Level::kInfo, "admin_state_loaded",
           "file=" + path + " entries=" + std::to_string(admin_states_.size()));
}

void Daemon::report_skipped_weights(const std::vector<SkippedWeight>& skipped) {
  std::vector<std::string> now;
  for (const SkippedWeight& k : skipped) {
    if (std::find(skipped_logged_.begin(), skipped_logged_.end(), k.message) ==
        skipped_logged_.end()) {
      log_.log(proxy::Level::kWarn, "admin_state_skipped", k.message);
    }
    now.push_back(k.message);
  }
  skipped_logged_ = std::move(now);
}

std::vector<SkippedWeight> Daemon::skipped_weights() {
  config::Config probe = discovery_->expand(base_cfg_);
  return admin_states_.apply_weights(probe);
}

Daemon::AdminResult Daemon::set_backend_admin(const std::string& pool, const std::string& id,
                                              const AdminSetting& s) {
  const AdminSetting before = admin_states_.get(pool, id);
  if (before == s) return {};
  const std::vector<SkippedWeight> skipped_before =
      s.weight != before.weight ? skipped_weights() : std::vector<SkippedWeight>{};
  admin_states_.set(pool, id, s);
  auto old = worker_->snapshot();
  std::shared_ptr<const proxy::Snapshot> next;
  if (s.weight != before.weight) {
    // A weight with which a pool could not be built would be left out (apply_weights): refused
    // here instead, so that what the operator is told is what runs.
    for (const SkippedWeight& k : skipped_weights()) {
      const bool was = std::any_of(skipped_before.begin(), skipped_before.end(), [&](auto& b) {
        return b.pool == k.pool && b.id == k.id;
      });
      if (was) continue;
      admin_states_.set(pool, id, before);
      if (k.pool == pool && k.id == id) return {AdminOutcome::kRejected, k.reason};
      return {AdminOutcome::kRejected, "the weight of backend \"" + k.id + "\" in pool \"" +
                                           k.pool + "\" would be left out: " + k.reason};
    }
    // A new weight moves keys: the placement is rebuilt from the running configuration.
    auto snap = build_snapshot(base_cfg_, generation_ + 1);
    if (!snap) {
      admin_states_.set(pool, id, before);
      admin_states_.apply_states(*old);
      return {AdminOutcome::kRejected, snap.error().message};
    }
    next = *snap;
  }
  if (const std::string& path = base_cfg_.admin.state_file; !path.empty()) {
    if (auto saved = admin_states_.save(path); !saved) {
      admin_states_.set(pool, id, before);
      admin_states_.apply_states(*old);
      log_.log(proxy::Level::kError, "admin_state_write_failed", saved.error().message);
      return {AdminOutcome::kNotSaved, saved.error().message};
    }
  }
  log_.log(proxy::Level::kInfo, "backend_admin_change",
           "pool=" + pool + " backend=" + id + " state=" +
               std::string(admin_state_name(s.state)) + " weight=" +
               (s.weight ? std::to_string(*s.weight) : std::string("configured")) +
               " was=" + std::string(admin_state_name(before.state)));
  if (!next) {
    admin_states_.apply_states(*old);
    return {AdminOutcome::kChanged, {}};
  }
  ++generation_;
  report_moved(*old, *next, "admin_moved");
  publish(next);
  after_publish(old);
  old.reset();
  registry_.prune();
  return {AdminOutcome::kChanged, {}};
}

}  // namespace rondel::server
