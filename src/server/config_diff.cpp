// Reload dry-run: placements of two configurations compared pool by pool.
#include "rondel/server/config_diff.h"

#include <algorithm>
#include <cstdio>

#include "rondel/core/backend_set.h"
#include "rondel/core/selector.h"
#include "rondel/proxy/placement.h"
#include "rondel/util/json_writer.h"

namespace rondel::server {

namespace {

// One pool's placement, built by the code Pool::build uses (proxy/placement.h), and the specs
// of its configured backends (none for a pool without backends, unlike the placeholder set).
struct Built {
  std::vector<core::BackendSpec> specs;
  proxy::Placement placement;
};

core::Result<Built> build(const config::PoolConfig& p) {
  auto placement = proxy::build_placement(p);
  if (!placement) return placement.error();
  Built b{{}, std::move(*placement)};
  for (const auto& be : p.backends) b.specs.push_back({proxy::placement_id(be), be.weight});
  return b;
}

// Notes on what changed in the placement options, and renamed ids (same position, new id that
// the old configuration does not have): `ideal_new` gets the old id back for the ideal.
std::vector<std::string> describe(const config::PoolConfig& a, const config::PoolConfig& b,
                                  const Built& old_b, std::vector<core::BackendSpec>& ideal_new) {
  std::vector<std::string> notes;
  if (a.algorithm != b.algorithm) {
    notes.push_back("algorithm " + std::string(core::name_of(a.algorithm)) + " -> " +
                    std::string(core::name_of(b.algorithm)) + ": the placements are unrelated");
  }
  if (a.points_per_weight != b.points_per_weight || a.max_points != b.max_points ||
      a.maglev_table_size != b.maglev_table_size) {
    notes.push_back("placement options (points, max_points, maglev_table_size) changed");
  }
  auto has = [](const std::vector<core::BackendSpec>& v, const std::string& id) {
    return std::any_of(v.begin(), v.end(), [&](const core::BackendSpec& s) { return s.id == id; });
  };
  for (size_t i = 0; i < std::min(old_b.specs.size(), ideal_new.size()); ++i) {
    const std::string& was = old_b.specs[i].id;
    const std::string now = ideal_new[i].id;
    if (was == now || has(old_b.specs, now) || has(ideal_new, was)) continue;
    notes.push_back("backend #" + std::to_string(i + 1) + " id '" + was + "' became '" + now +
                    "': its keys move; keep `id: " + was + "` to keep its placement");
    ideal_new[i].id = was;
  }
  return notes;
}

}  // namespace

bool far_above_ideal(const core::PlacementDiff& d, double ideal) noexcept {
  return d.moved > 1.5 * ideal + 0.02 + 3 * d.moved_stderr;
}

core::Result<std::vector<PoolDiff>> diff_configs(const config::Config& prev,
                                                 const config::Config& next, uint64_t samples) {
  std::vector<PoolDiff> out;
  for (const config::PoolConfig& np : next.pools) {
    PoolDiff pd;
    pd.pool = np.name;
    auto old_it = std::find_if(prev.pools.begin(), prev.pools.end(),
                               [&](const config::PoolConfig& p) { return p.name == np.name; });
    auto nb = build(np);
    if (!nb) return nb.error();
    if (old_it == prev.pools.end()) {
      pd.change = PoolChange::kAdded;
      out.push_back(std::move(pd));
      continue;
    }
    auto ob = build(*old_it);
    if (!ob) return ob.error();
    std::vector<core::BackendSpec> ideal_new = nb->specs;
    pd.notes = describe(*old_it, np, *ob, ideal_new);
    pd.diff = core::diff_placements(ob->placement.set, ob->placement.selector, nb->placement.set,
                                   nb->placement.selector, samples);
    pd.ideal = core::ideal_moved_share(ob->specs, ideal_new);
    if (far_above_ideal(pd.diff, pd.ideal)) {
      char buf[160];
      std::snprintf(buf, sizeof buf, "%.2f%% of the key space moves, far above the ideal %.2f%%",
                    100 * pd.diff.moved, 100 * pd.ideal);
      pd.warning = buf;
      if (!pd.notes.empty()) pd.warning += ": " + pd.notes.front();
    }
    out.push_back(std::move(pd));
  }
  for (const config::PoolConfig& op : prev.pools) {
    const bool kept = std::any_of(next.pools.begin(), next.pools.end(),
                                  [&](const config::PoolConfig& p) { return p.name == op.name; });
    if (kept) continue;
    PoolDiff pd;
    pd.pool = op.name;
    pd.change = PoolChange::kRemoved;
    out.push_back(std::move(pd));
  }
  return out;
}

std::string diff_text(const std::vector<PoolDiff>& diffs, size_t max_rows) {
  std::string out;
  char buf[512];
  for (const PoolDiff& d : diffs) {
    if (d.change != PoolChange::kChanged) {
      out += "pool " + d.pool +
             (d.change == PoolChange::kAdded ? ": new pool (no keys to move)\n"
                                             : ": removed (all its keys lose their home)\n");
      continue;
    }
    std::snprintf(buf, sizeof buf,
                  "pool %s: %.2f%% of the key space would change home (ideal %.2f%%; %llu "
                  "sampled keys, standard error %.2f%%)\n",
                  d.pool.c_str(), 100 * d.diff.moved, 100 * d.ideal,
                  static_cast<unsigned long long>(d.diff.samples), 100 * d.diff.moved_stderr);
    out += buf;
    for (const std::string& n : d.notes) out += "  note: " + n + "\n";
    if (!d.diff.moves.empty()) {
      std::snprintf(buf, sizeof buf, "  %-32s %-32s %8s\n", "from", "to", "share");
      out += buf;
    }
    for (size_t i = 0; i < d.diff.moves.size() && i < max_rows; ++i) {
      const core::MoveShare& m = d.diff.moves[i];
      std::snprintf(buf, sizeof buf, "  %-32s %-32s %7.3f%%\n", m.from.c_str(), m.to.c_str(),
                    100 * m.share);
      out += buf;
    }
    if (d.diff.moves.size() > max_rows) {
      out += "  ... " + std::to_string(d.diff.moves.size() - max_rows) + " more (see --json)\n";
    }
    if (!d.warning.empty()) out += "  warning: " + d.warning + "\n";
  }
  return out;
}

std::string diff_json(const std::vector<PoolDiff>& diffs) {
  util::JsonWriter j;
  j.begin();
  uint64_t samples = 0;
  for (const PoolDiff& d : diffs) samples = std::max(samples, d.diff.samples);
  j.field("samples", samples);
  j.begin_array("pools");
  for (const PoolDiff& d : diffs) {
    j.begin();
    j.field("pool", d.pool);
    j.field("change", d.change == PoolChange::kChanged ? "changed"
                      : d.change == PoolChange::kAdded ? "added"
                                                       : "removed");
    if (d.change == PoolChange::kChanged) {
      j.field("samples", d.diff.samples);
      j.field("moved", d.diff.moved);
      j.field("moved_stderr", d.diff.moved_stderr);
      j.field("ideal", d.ideal);
      j.field("warning", d.warning);
      j.begin_array("notes");
      for (const std::string& n : d.notes) j.value(n);
      j.end_array();
      j.begin_array("moves");
      for (const core::MoveShare& m : d.diff.moves) {
        j.begin();
        j.field("from", m.from);
        j.field("to", m.to);
        j.field("share", m.share);
        j.end();
      }
      j.end_array();
    }
    j.end();
  }
  j.end_array();
  j.end();
  std::string s = j.str();
  s += '\n';
  return s;
}

}  // namespace rondel::server
