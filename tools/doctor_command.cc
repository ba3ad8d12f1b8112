#include "tools/doctor_command.h"

#include <dirent.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>

#include "util/strings.h"

namespace tower {
namespace {

constexpr char kUsage[] =
    "usage: tower doctor DIR\n"
    "Reads the flight recorder files (flight_recorder.rank<R>.json) that the workers of a run\n"
    "wrote into DIR (tower train --flight-recorder=DIR, or $TOWER_FLIGHT_RECORDER_DIR) when a\n"
    "collective missed its deadline, the workers diverged, the job was aborted, or on SIGUSR1,\n"
    "and says which rank went astray, at which collective, and what every rank was doing.\n"
    "Exit code: 0 nothing wrong found, 1 a problem named, 2 bad input.\n";

std::string Seconds(int64_t ns) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.3f s", static_cast<double>(ns) / 1e9);
  return text;
}

std::string RankName(const std::map<int, const RankDump*>& dumps, int rank) {
  auto it = dumps.find(rank);
  std::string name = "rank " + std::to_string(rank);
  if (it != dumps.end() && !it->second->host.empty()) name += " (host " + it->second->host + ")";
  return name;
}

std::string RankList(const std::map<int, const RankDump*>& dumps, const std::vector<int>& ranks) {
  std::vector<std::string> names;
  for (int rank : ranks) names.push_back(RankName(dumps, rank));
  if (names.size() <= 1) return Join(names, "");
  return Join(std::vector<std::string>(names.begin(), names.end() - 1), ", ") + " and " +
         names.back();
}

// "all-reduce of 6 tensors (26 floats), step 5, bucket 0, 104 bytes of float32"
std::string DescribeRecord(const RecordedCollectiveView& record) {
  std::string text = record.what.empty() ? record.kind : record.what;
  text += ", step " + std::to_string(record.step);
  if (record.bucket >= 0) text += ", bucket " + std::to_string(record.bucket);
  text += ", " + std::to_string(record.bytes) + " bytes of " + record.dtype;
  return text;
}

// What `dump`'s rank was doing when it wrote its file.
std::string Doing(const std::map<int, const RankDump*>& dumps, const RankDump& dump) {
  // The reason without the rank's own name (said already), and kept short.
  std::string reason = dump.reason;
  const std::string own = RankName(dumps, dump.rank) + ": ";
  if (StartsWith(reason, own)) reason = reason.substr(own.size());
  if (reason.size() > 160) reason = reason.substr(0, 157) + "...";
  std::string text = RankName(dumps, dump.rank) + " wrote its file on \"" + reason + "\"";
  const RecordedCollectiveView* last = nullptr;
  for (const RecordedCollectiveView& record : dump.records) {
    if (record.scope == "workers" && (last == nullptr || record.sequence >= last->sequence)) {
      last = &record;
    }
  }
  if (last != nullptr) {
    text += "; its last collective was " + std::to_string(last->sequence) + " (" +
            DescribeRecord(*last) + "), ";
    if (last->state == "in flight") {
      text += "in flight for " + Seconds(dump.dumped_unix_ns - last->start_unix_ns);
    } else {
      text += last->state + " after " + Seconds(last->end_unix_ns - last->start_unix_ns);
    }
  } else {
    text += "; it had no collective with the other workers recorded";
  }
  // Each replica's last sum, when it did not complete: where the replica stopped.
  std::map<int, const RecordedCollectiveView*> last_sum;
  for (const RecordedCollectiveView& record : dump.records) {
    if (record.scope != "replicas") continue;
    const RecordedCollectiveView*& last = last_sum[record.replica];
    if (last == nullptr || record.start_unix_ns >= last->start_unix_ns) last = &record;
  }
  std::vector<std::string> unfinished;
  for (const auto& [replica, record] : last_sum) {
    if (record->state == "done") continue;
    const std::string sum = "replica " + std::to_string(replica) + " in its " + record->kind +
                            (record->bucket >= 0 ? " of bucket " + std::to_string(record->bucket)
                                                 : "") +
                            " of step " + std::to_string(record->step);
    unfinished.push_back(record->state == "in flight"
                             ? sum + " for " + Seconds(dump.dumped_unix_ns - record->start_unix_ns)
                             : sum + ", which failed");
  }
  if (!unfinished.empty()) text += "; replicas stopped: " + Join(unfinished, ", ");
  return text + ".";
}

// Why a collective's fingerprint differs, from what the records say.
std::string LikelyCause(const RecordedCollectiveView& expected, const RecordedCollectiveView& actual) {
  if (actual.kind != expected.kind) {
    return "it ran a " + actual.kind + " where the others ran a " + expected.kind +
           " (its code took another path)";
  }
  if (actual.step > expected.step) {
    return "it is already at step " + std::to_string(actual.step) + ": it skipped a collective "
           "of step " + std::to_string(expected.step);
  }
  if (actual.step < expected.step) {
    return "it is still at step " + std::to_string(actual.step) + ": it ran a collective more "
           "than the others in an earlier step";
  }
  if (actual.bytes != expected.bytes) {
    return "it sends " + std::to_string(actual.bytes) + " bytes where the others send " +
           std::to_string(expected.bytes) + ": other shapes";
  }
  return "the same size but other shapes or dtypes";
}

}  // namespace

StatusOr<RankDump> ParseRankDump(const std::string& json_text, const std::string& path) {
  try {
    const nlohmann::json in = nlohmann::json::parse(json_text);
    RankDump dump;
    dump.rank = in.at("rank").get<int>();
    dump.world_size = in.at("world_size").get<int>();
    dump.host = in.value("host", "");
    dump.reason = in.value("reason", "");
    dump.dumped_unix_ns = in.value("dumped_unix_ns", int64_t{0});
    for (const nlohmann::json& entry : in.at("records")) {
      RecordedCollectiveView record;
      record.scope = entry.at("scope").get<std::string>();
      record.kind = entry.at("kind").get<std::string>();
      record.sequence = entry.at("sequence").get<uint64_t>();
      record.step = entry.value("step", int64_t{0});
      record.bucket = entry.value("bucket", -1);
      record.replica = entry.value("replica", -1);
      record.bytes = entry.value("bytes", int64_t{0});
      record.dtype = entry.value("dtype", "");
      record.fingerprint = entry.at("fingerprint").get<std::string>();
      record.what = entry.value("what", "");
      record.start_unix_ns = entry.value("start_unix_ns", int64_t{0});
      record.end_unix_ns = entry.value("end_unix_ns", int64_t{0});
      record.state = entry.value("state", "");
      dump.records.push_back(std::move(record));
    }
    if (dump.rank < 0 || dump.world_size < 1 || dump.rank >= dump.world_size) {
      return InvalidArgumentError(path + ": rank " + std::to_string(dump.rank) + " of " +
                                  std::to_string(dump.world_size) + " is not a rank");
    }
    return dump;
  } catch (const std::exception& e) {
    return InvalidArgumentError(path + " is not a flight recorder file: " + e.what());
  }
}

// What the ranks' files say, arranged for the diagnosis's rules.
struct Evidence {
  std::map<int, const RankDump*> dumps;  // by rank
  int world = 0;
  std::vector<int> without_file;  // ranks of the world that wrote no file
  // Each rank's collectives with the other workers, by sequence number.
  std::map<int, std::map<uint64_t, const RecordedCollectiveView*>> by_rank;
  std::set<uint64_t> sequences;
};

Evidence Gather(const std::vector<RankDump>& all) {
  Evidence e;
  for (const RankDump& dump : all) {
    e.dumps[dump.rank] = &dump;
    e.world = std::max(e.world, dump.world_size);
  }
  for (int rank = 0; rank < e.world; ++rank) {
    if (e.dumps.count(rank) == 0) e.without_file.push_back(rank);
  }
  for (const auto& [rank, dump] : e.dumps) {
    auto& mine = e.by_rank[rank];
    for (const RecordedCollectiveView& record : dump->records) {
      if (record.scope != "workers") continue;
      mine[record.sequence] = &record;
      e.sequences.insert(record.sequence);
    }
  }
  return e;
}

// What every rank was doing when it wrote its file, and which ranks wrote none.
std::string WhatEachRankDid(const Evidence& e) {
  std::vector<std::string> lines;
  for (const auto& [rank, dump] : e.dumps) lines.push_back(Doing(e.dumps, *dump));
  std::string text = " " + Join(lines, " ");
  if (!e.without_file.empty()) {
    text += " No file came from " + RankList(e.dumps, e.without_file) +
            " (it was killed before it could write one, or it ran without a flight recorder "
            "directory).";
  }
  return text;
}

// Rule 1: the first collective whose fingerprints differ between ranks.
bool FirstDivergence(const Evidence& e, Diagnosis* diagnosis, std::ostringstream& paragraph) {
  for (uint64_t sequence : e.sequences) {
    std::map<std::string, std::vector<int>> groups;
    for (const auto& [rank, records] : e.by_rank) {
      auto it = records.find(sequence);
      if (it != records.end()) groups[it->second->fingerprint].push_back(rank);
    }
    if (groups.size() < 2) continue;
    // The fingerprint most ranks have is the expected one; the others went astray.
    auto expected = std::max_element(groups.begin(), groups.end(), [](const auto& a, const auto& b) {
      return a.second.size() < b.second.size();
    });
    size_t ties = 0;
    for (const auto& group : groups) ties += group.second.size() == expected->second.size();
    diagnosis->problem = true;
    diagnosis->sequence = sequence;
    diagnosis->expected_fingerprint = expected->first;
    const RecordedCollectiveView& want = *e.by_rank.at(expected->second.front()).at(sequence);
    if (ties > 1) {
      paragraph << "The ranks disagree at collective " << sequence
                << " and no fingerprint has a majority:";
      for (const auto& [fingerprint, ranks] : groups) {
        const RecordedCollectiveView& got = *e.by_rank.at(ranks.front()).at(sequence);
        paragraph << " " << RankList(e.dumps, ranks) << " ran " << DescribeRecord(got)
                  << " (fingerprint " << fingerprint << ");";
      }
      paragraph << " one of them went astray.";
    } else {
      for (const auto& [fingerprint, ranks] : groups) {
        if (fingerprint == expected->first) continue;
        const RecordedCollectiveView& got = *e.by_rank.at(ranks.front()).at(sequence);
        if (diagnosis->faulty_rank < 0) {
          diagnosis->faulty_rank = ranks.front();
          diagnosis->actual_fingerprint = fingerprint;
        }
        paragraph << RankList(e.dumps, ranks) << " diverged at collective " << sequence << ": "
                  << (ranks.size() > 1 ? "they ran " : "it ran ") << DescribeRecord(got)
                  << " with fingerprint " << fingerprint << ", where " << RankList(e.dumps, expected->second)
                  << " ran " << DescribeRecord(want) << " with fingerprint " << expected->first
                  << " (expected " << expected->first << ", actual " << fingerprint << "): "
                  << LikelyCause(want, got) << ".";
      }
    }
    return true;
  }

  return false;
}

// Rule 2: the first collective some ranks entered and others never reached.
bool FirstMissed(const Evidence& e, Diagnosis* diagnosis, std::ostringstream& paragraph) {
  for (uint64_t sequence : e.sequences) {
    std::vector<int> entered, never;
    for (const auto& [rank, records] : e.by_rank) {
      if (records.count(sequence) != 0) {
        entered.push_back(rank);
      } else if (records.empty() || records.rbegin()->first < sequence) {
        never.push_back(rank);
      }
    }
    if (entered.empty() || never.empty()) continue;
    diagnosis->problem = true;
    diagnosis->faulty_rank = never.front();
    diagnosis->sequence = sequence;
    const RecordedCollectiveView& want = *e.by_rank.at(entered.front()).at(sequence);
    diagnosis->expected_fingerprint = want.fingerprint;
    paragraph << RankList(e.dumps, never) << " never reached collective " << sequence << " ("
              << DescribeRecord(want) << ", fingerprint " << want.fingerprint << ") that "
              << RankList(e.dumps, entered) << " entered";
    for (int rank : never) {
      const auto& records = e.by_rank.at(rank);
      if (records.empty()) {
        paragraph << "; " << RankName(e.dumps, rank) << " recorded no collective at all";
      } else {
        const RecordedCollectiveView& last = *records.rbegin()->second;
        paragraph << "; " << RankName(e.dumps, rank) << "'s last was collective " << last.sequence
                  << " (" << DescribeRecord(last) << ", " << last.state << ")";
      }
    }
    paragraph << ": it stalled or died before collective " << sequence
              << ", or its code skipped every collective after that.";
    return true;
  }

  return false;
}

// Rule 3: a rank without a file while the others' last collective never completed: it never
// arrived there (a rank that stalls is often killed before it can write its file).
bool SilentRankHeldTheLast(const Evidence& e, Diagnosis* diagnosis,
                           std::ostringstream& paragraph) {
  if (!e.without_file.empty() && !e.sequences.empty()) {
    const uint64_t last = *e.sequences.rbegin();
    std::vector<int> stuck;
    const RecordedCollectiveView* record = nullptr;
    for (const auto& [rank, records] : e.by_rank) {
      auto it = records.find(last);
      if (it != records.end() && it->second->state != "done") {
        stuck.push_back(rank);
        record = it->second;
      }
    }
    if (record != nullptr) {
      diagnosis->problem = true;
      diagnosis->faulty_rank = e.without_file.front();
      diagnosis->sequence = last;
      diagnosis->expected_fingerprint = record->fingerprint;
      paragraph << RankList(e.dumps, e.without_file) << " wrote no file, and "
                << RankList(e.dumps, stuck) << " never saw collective " << last << " ("
                << DescribeRecord(*record) << ", fingerprint " << record->fingerprint
                << ") complete: " << RankList(e.dumps, e.without_file)
                << " most likely never reached it (stalled, or died, before it could write its "
                   "file).";
      return true;
    }
  }

  return false;
}

// Rule 4: nothing diverged in what the files hold.
void NothingDiverged(const Evidence& e, Diagnosis* diagnosis, std::ostringstream& paragraph) {
  if (!e.without_file.empty()) {
    diagnosis->problem = true;
    diagnosis->faulty_rank = e.without_file.front();
    paragraph << "The files that came agree on every collective they hold ("
              << (e.sequences.empty() ? 0 : *e.sequences.rbegin()) << " at most), but "
              << RankList(e.dumps, e.without_file) << " wrote none: look there first.";
  } else {
    paragraph << "No divergence: all " << e.dumps.size() << " ranks agree on every collective "
              << "their files hold";
    if (!e.sequences.empty()) paragraph << " (up to collective " << *e.sequences.rbegin() << ")";
    paragraph << ".";
  }
}

Diagnosis Diagnose(const std::vector<RankDump>& all) {
  const Evidence e = Gather(all);
  Diagnosis diagnosis;
  std::ostringstream paragraph;
  if (!FirstDivergence(e, &diagnosis, paragraph) && !FirstMissed(e, &diagnosis, paragraph) &&
      !SilentRankHeldTheLast(e, &diagnosis, paragraph)) {
    NothingDiverged(e, &diagnosis, paragraph);
  }
  diagnosis.paragraph = paragraph.str() + WhatEachRankDid(e);
  return diagnosis;
}

int RunDoctorCommand(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  if (args.size() == 1 && (args[0] == "--help" || args[0] == "-h")) {
    out << kUsage;
    return 0;
  }
  if (args.size() != 1 || args[0].empty() || args[0][0] == '-') {
    err << "error: give the flight recorder directory: tower doctor DIR\n" << kUsage;
    return 2;
  }
  const std::string directory = args[0];
  DIR* listing = opendir(directory.c_str());
  if (listing == nullptr) {
    err << "error: cannot read the directory " << directory << "\n";
    return 2;
  }
  std::vector<std::string> paths;
  while (dirent* entry = readdir(listing)) {
    const std::string name = entry->d_name;
    if (StartsWith(name, "flight_recorder.rank") && EndsWith(name, ".json")) {
      paths.push_back(directory + "/" + name);
    }
  }
  closedir(listing);
  std::sort(paths.begin(), paths.end());
  if (paths.empty()) {
    err << "error: no flight recorder files (flight_recorder.rank<R>.json) in " << directory
        << ": run with --flight-recorder=" << directory << " (or $TOWER_FLIGHT_RECORDER_DIR)\n";
    return 2;
  }
  std::vector<RankDump> dumps;
  for (const std::string& path : paths) {
    std::ifstream file(path);
    std::stringstream text;
    text << file.rdbuf();
    if (!file) {
      err << "error: cannot read " << path << "\n";
      return 2;
    }
    StatusOr<RankDump> dump = ParseRankDump(text.str(), path);
    if (!dump.ok()) {
      err << "error: " << dump.status().message() << "\n";
      return 2;
    }
    dumps.push_back(std::move(*dump));
  }
  const Diagnosis diagnosis = Diagnose(dumps);
  out << diagnosis.paragraph << "\n";
  return diagnosis.problem ? 1 : 0;
}

}  // namespace tower
