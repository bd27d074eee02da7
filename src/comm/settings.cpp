#include "comm/settings.h"

#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <map>

#include "base/params.h"

namespace weft {
namespace {

uint64_t fnv1a(const std::string& s) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
  return h;
}

std::string num(int64_t v) { return std::to_string(v); }

// One setting on the wire: the hash of the full value, and as much of it as
// fits for the message.
struct Entry {
  uint64_t hash;
  char shown[56];
};
constexpr size_t kMaxSettings = 24;
struct Row {
  uint32_t count;
  uint32_t pad;
  Entry entries[kMaxSettings];
};

}  // namespace

std::vector<Setting> shared_settings(const tune::Options& t) {
  std::string file = "(built-in constants)";
  if (!t.tuning_file.empty()) {
    // The contents matter, not the path (it may differ between hosts).
    std::ifstream in(t.tuning_file, std::ios::binary);
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    char buf[48];
    std::snprintf(buf, sizeof(buf), "contents %016llx", static_cast<unsigned long long>(fnv1a(text)));
    file = in ? buf : "(unreadable)";
  }
  return {
      {t.algo_source, t.algo.empty() ? "(auto)" : t.algo},
      {"WEFT_HIER_LEVELS", t.hier_levels.empty() ? "(auto)" : t.hier_levels},
      {"WEFT_HIER_ROUNDS", num(t.hier_rounds)},
      {"WEFT_TUNING_FILE", file},
      {"WEFT_TUNE_ONLINE", num(params::TUNE_ONLINE())},
      {"WEFT_TUNE_CANDIDATES", num(params::TUNE_CANDIDATES())},
      {"WEFT_TUNE_RANGE_PCT", num(params::TUNE_RANGE_PCT())},
      {"WEFT_TUNE_ROUNDS", num(params::TUNE_ROUNDS())},
      {"WEFT_TUNE_FINAL_ROUNDS", num(params::TUNE_FINAL_ROUNDS())},
      {"WEFT_TUNE_KEEP_PCT", num(params::TUNE_KEEP_PCT())},
      {"WEFT_TUNE_TURN_US", num(params::TUNE_TURN_US())},
      {"WEFT_CHUNK_BYTES", num(params::CHUNK_BYTES())},
      {"WEFT_DEVICE_CHUNK_BYTES", num(params::DEVICE_CHUNK_BYTES())},
      {"WEFT_P2P_ONESHOT_BYTES", num(params::P2P_ONESHOT_BYTES())},
      {"WEFT_CHECK", num(params::CHECK())},
      {"WEFT_TRANSPORT", params::TRANSPORT().empty() ? "(auto)" : params::TRANSPORT()},
      {"WEFT_SHM_SLOT_BYTES", num(params::SHM_SLOT_BYTES())},
      {"WEFT_SHM_SLOTS", num(params::SHM_SLOTS())},
      {"WEFT_SHM_EAGER_MAX", num(params::SHM_EAGER_MAX())},
      {"WEFT_NSOCKS", num(params::NSOCKS())},
      {"WEFT_TCP_MIN_SLICE", num(params::TCP_MIN_SLICE())},
      {"WEFT_IB_SLOTS", num(params::IB_SLOTS())},
      {"WEFT_IB_SLOT_BYTES", num(params::IB_SLOT_BYTES())},
  };
}

Status agree_on_settings(boot::Bootstrap& boot, int nranks, const std::vector<Setting>& mine, Deadline deadline) {
  if (mine.size() > kMaxSettings)
    return Error(weftInternalError, "%zu shared settings, the wire holds %zu", mine.size(), kMaxSettings);
  Row row{};
  row.count = static_cast<uint32_t>(mine.size());
  for (size_t i = 0; i < mine.size(); ++i) {
    row.entries[i].hash = fnv1a(mine[i].value);
    std::snprintf(row.entries[i].shown, sizeof(row.entries[i].shown), "%s", mine[i].value.c_str());
  }
  std::vector<Row> all(static_cast<size_t>(nranks));
  WEFT_TRY(boot.allgather(&row, sizeof(row), all.data(), deadline));
  for (int r = 0; r < nranks; ++r)
    if (all[static_cast<size_t>(r)].count != row.count)
      return Error(weftInvalidUsage, "ranks run different weft versions: rank %d shares %u settings, this rank %u", r,
                   all[static_cast<size_t>(r)].count, row.count);
  for (size_t i = 0; i < mine.size(); ++i) {
    // Which ranks hold which value, values in order of their first rank.
    std::map<uint64_t, std::pair<std::string, std::string>> holders;  // hash -> (shown, ranks)
    std::vector<uint64_t> order;
    for (int r = 0; r < nranks; ++r) {
      const Entry& e = all[static_cast<size_t>(r)].entries[i];
      auto [it, fresh] = holders.try_emplace(e.hash, std::string(e.shown, strnlen(e.shown, sizeof(e.shown))), "");
      if (fresh) order.push_back(e.hash);
      it->second.second += (it->second.second.empty() ? "" : ", ") + std::to_string(r);
    }
    if (order.size() == 1) continue;
    std::string text;
    for (uint64_t h : order)
      text += (text.empty() ? "" : "; ") + holders[h].first + " on rank" +
              (holders[h].second.find(',') == std::string::npos ? " " : "s ") + holders[h].second;
    return Error(weftInvalidUsage,
                 "%s differs between ranks: %s. Every rank must use the same value: it changes the "
                 "schedules, the tuner's choices or the wire format",
                 mine[i].name.c_str(), text.c_str());
  }
  return Status::Ok();
}

}  // namespace weft
