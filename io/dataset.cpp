// Manifest parsing (one function per kind of line, then the whole-file checks) and writing
// (manifest.txt, line based).
#include "io/dataset.hpp"

#include <cstdio>
#include <fstream>
#include <sstream>

#include "nostrum/core/error.hpp"

namespace nostrum::io {

const SplitInfo& Manifest::split(const std::string& name) const {
  std::string names;
  for (const SplitInfo& s : splits) {
    if (s.name == name) return s;
    names += (names.empty() ? "" : ", ") + s.name;
  }
  throw DataError("the dataset has no split '" + name + "'", "manifest", "splits: " + names);
}

namespace {

// One manifest line being parsed: the fields after its key, and where it is (for errors).
struct ManifestLine {
  std::string text, where;
  std::istringstream fields;

  ManifestLine(const std::string& line, std::string place)
      : text(line), where(std::move(place)), fields(line) {}
  // The rest of the line after the fields read so far, leading blanks dropped.
  std::string rest() {
    std::string tail;
    std::getline(fields >> std::ws, tail);
    return tail;
  }
  void need(bool ok) const {
    NOSTRUM_CHECK(ok, DataError, "malformed manifest line '" + text + "'", where);
  }
};

// What the whole-file checks need beyond the manifest itself.
struct ManifestHeader {
  bool have_format = false;
  int64_t declared_classes = -1;
};

// format nostrum-dataset <version>
void parse_format(ManifestLine& l, ManifestHeader& header) {
  std::string format;
  int64_t version = 0;
  l.fields >> format >> version;
  l.need(!l.fields.fail());
  NOSTRUM_CHECK(format == "nostrum-dataset", DataError, "not a nostrum dataset manifest", l.where);
  NOSTRUM_CHECK(version == kManifestVersion, DataError,
                "manifest version " + std::to_string(version) + ", this build reads " +
                    std::to_string(kManifestVersion),
                l.where);
  header.have_format = true;
}

// image_kind <kind> | image_size <h> <w> <c> | mean <v>... | std <v>...
void parse_image_line(const std::string& key, ManifestLine& l, Manifest& m) {
  if (key == "image_kind") {
    std::string kind;
    l.fields >> kind;
    m.kind = parse_image_kind(kind, l.where);
  } else if (key == "image_size") {
    l.fields >> m.height >> m.width >> m.channels;
    l.need(!l.fields.fail() && m.height >= 0 && m.width >= 0 &&
           (m.channels == 1 || m.channels == 3));
  } else {
    std::vector<float>& values = key == "mean" ? m.mean : m.std;
    float v = 0;
    while (l.fields >> v) values.push_back(v);
    l.need(!values.empty());
  }
}

// classes <n> | class <index> <name>
void parse_class_line(const std::string& key, ManifestLine& l, Manifest& m,
                      ManifestHeader& header) {
  if (key == "classes") {
    l.fields >> header.declared_classes;
    l.need(!l.fields.fail() && header.declared_classes > 0);
    return;
  }
  int64_t index = -1;
  l.fields >> index;
  l.need(!l.fields.fail() && index == static_cast<int64_t>(m.classes.size()));
  m.classes.push_back(l.rest());
  l.need(!m.classes.back().empty());
}

// split <name> <count> | shard <split> <count> <path> | skipped <split> <path> TAB <reason>
void parse_split_line(const std::string& key, ManifestLine& l, Manifest& m) {
  if (key == "split") {
    SplitInfo s;
    l.fields >> s.name >> s.count;
    l.need(!l.fields.fail() && s.count >= 0);
    m.splits.push_back(s);
    return;
  }
  std::string split;
  l.fields >> split;
  l.need(!l.fields.fail());
  SplitInfo* target = nullptr;
  for (SplitInfo& s : m.splits)
    if (s.name == split) target = &s;
  NOSTRUM_CHECK(target, DataError, "line refers to split '" + split + "' before its split line",
                l.where);
  if (key == "shard") {
    ShardInfo shard;
    l.fields >> shard.count;
    shard.path = l.rest();
    l.need(!l.fields.fail() && shard.count > 0 && !shard.path.empty());
    target->shards.push_back(shard);
  } else {
    const std::string text = l.rest();
    const size_t tab = text.rfind('\t');
    l.need(tab != std::string::npos);
    target->skipped.push_back({text.substr(0, tab), text.substr(tab + 1)});
  }
}

// The checks over the whole file: a format line, the class count, each split's sample count.
void check_manifest(const Manifest& m, const ManifestHeader& header, const std::string& path) {
  NOSTRUM_CHECK(header.have_format, DataError, "manifest has no 'format nostrum-dataset 1' line",
                path);
  NOSTRUM_CHECK(header.declared_classes == static_cast<int64_t>(m.classes.size()), DataError,
                "manifest declares " + std::to_string(header.declared_classes) +
                    " classes but lists " + std::to_string(m.classes.size()),
                path);
  for (const SplitInfo& s : m.splits) {
    int64_t total = 0;
    for (const ShardInfo& shard : s.shards) total += shard.count;
    NOSTRUM_CHECK(total == s.count, DataError,
                  "split '" + s.name + "' declares " + std::to_string(s.count) +
                      " samples but its shards hold " + std::to_string(total),
                  path);
  }
}

}  // namespace

Manifest Manifest::read(const std::string& dir) {
  const std::string path = dir + "/" + kManifestName;
  std::ifstream in(path);
  NOSTRUM_CHECK(in.good(), IoError, "cannot open the dataset manifest", path,
                "convert a dataset with nostrum-shards first");
  Manifest m;
  ManifestHeader header;
  std::string text;
  for (int line_number = 1; std::getline(in, text); ++line_number) {
    if (text.empty() || text[0] == '#') continue;
    ManifestLine l(text, path + ":" + std::to_string(line_number));
    std::string key;
    l.fields >> key;
    if (key == "format")
      parse_format(l, header);
    else if (key == "image_kind" || key == "image_size" || key == "mean" || key == "std")
      parse_image_line(key, l, m);
    else if (key == "classes" || key == "class")
      parse_class_line(key, l, m, header);
    else if (key == "split" || key == "shard" || key == "skipped")
      parse_split_line(key, l, m);
    else
      throw DataError("unknown manifest key '" + key + "'", l.where);
  }
  check_manifest(m, header, path);
  return m;
}

void Manifest::write(const std::string& dir) const {
  const std::string path = dir + "/" + kManifestName;
  const std::string partial = path + ".partial";
  {
    std::ofstream out(partial, std::ios::trunc);
    NOSTRUM_CHECK(out.good(), IoError, "cannot write the manifest", partial);
    out << "# nostrum dataset manifest: see io/README.md\n";
    out << "format nostrum-dataset " << kManifestVersion << "\n";
    out << "image_kind " << to_string(kind) << "\n";
    out << "image_size " << height << " " << width << " " << channels << "\n";
    if (!mean.empty()) {
      out << "mean";
      for (float v : mean) out << " " << v;
      out << "\nstd";
      for (float v : std) out << " " << v;
      out << "\n";
    }
    out << "classes " << classes.size() << "\n";
    for (size_t i = 0; i < classes.size(); ++i) out << "class " << i << " " << classes[i] << "\n";
    for (const SplitInfo& s : splits) {
      out << "split " << s.name << " " << s.count << "\n";
      for (const ShardInfo& shard : s.shards)
        out << "shard " << s.name << " " << shard.count << " " << shard.path << "\n";
      for (const SkippedInput& skip : s.skipped)
        out << "skipped " << s.name << " " << skip.path << "\t" << skip.reason << "\n";
    }
    out.flush();
    NOSTRUM_CHECK(out.good(), IoError, "cannot write the manifest", partial);
  }
  NOSTRUM_CHECK(std::rename(partial.c_str(), path.c_str()) == 0, IoError,
                "cannot rename the manifest", path);
}

}  // namespace nostrum::io
