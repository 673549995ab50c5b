// Manifest parsing and writing (manifest.txt, line based).
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

Manifest Manifest::read(const std::string& dir) {
  const std::string path = dir + "/" + kManifestName;
  std::ifstream in(path);
  NOSTRUM_CHECK(in.good(), IoError, "cannot open the dataset manifest", path,
                "convert a dataset with nostrum-shards first");
  Manifest m;
  std::string line;
  int line_number = 0;
  bool have_format = false;
  int64_t declared_classes = -1;
  while (std::getline(in, line)) {
    ++line_number;
    const std::string where = path + ":" + std::to_string(line_number);
    if (line.empty() || line[0] == '#') continue;
    std::istringstream fields(line);
    std::string key;
    fields >> key;
    const auto rest = [&]() {
      std::string text;
      std::getline(fields >> std::ws, text);
      return text;
    };
    const auto need = [&](bool ok) {
      NOSTRUM_CHECK(ok, DataError, "malformed manifest line '" + line + "'", where);
    };
    if (key == "format") {
      std::string format;
      int64_t version = 0;
      fields >> format >> version;
      need(!fields.fail());
      NOSTRUM_CHECK(format == "nostrum-dataset", DataError, "not a nostrum dataset manifest",
                    where);
      NOSTRUM_CHECK(version == kManifestVersion, DataError,
                    "manifest version " + std::to_string(version) + ", this build reads " +
                        std::to_string(kManifestVersion),
                    where);
      have_format = true;
    } else if (key == "image_kind") {
      std::string kind;
      fields >> kind;
      m.kind = parse_image_kind(kind, where);
    } else if (key == "image_size") {
      fields >> m.height >> m.width >> m.channels;
      need(!fields.fail() && m.height >= 0 && m.width >= 0 && (m.channels == 1 || m.channels == 3));
    } else if (key == "mean" || key == "std") {
      std::vector<float>& values = key == "mean" ? m.mean : m.std;
      float v = 0;
      while (fields >> v) values.push_back(v);
      need(!values.empty());
    } else if (key == "classes") {
      fields >> declared_classes;
      need(!fields.fail() && declared_classes > 0);
    } else if (key == "class") {
      int64_t index = -1;
      fields >> index;
      need(!fields.fail() && index == static_cast<int64_t>(m.classes.size()));
      m.classes.push_back(rest());
      need(!m.classes.back().empty());
    } else if (key == "split") {
      SplitInfo s;
      fields >> s.name >> s.count;
      need(!fields.fail() && s.count >= 0);
      m.splits.push_back(s);
    } else if (key == "shard" || key == "skipped") {
      std::string split;
      fields >> split;
      need(!fields.fail());
      SplitInfo* target = nullptr;
      for (SplitInfo& s : m.splits)
        if (s.name == split) target = &s;
      NOSTRUM_CHECK(target, DataError, "line refers to split '" + split + "' before its split line",
                    where);
      if (key == "shard") {
        ShardInfo shard;
        fields >> shard.count;
        shard.path = rest();
        need(!fields.fail() && shard.count > 0 && !shard.path.empty());
        target->shards.push_back(shard);
      } else {
        const std::string text = rest();  // <path> TAB <reason>
        const size_t tab = text.rfind('\t');
        need(tab != std::string::npos);
        target->skipped.push_back({text.substr(0, tab), text.substr(tab + 1)});
      }
    } else {
      throw DataError("unknown manifest key '" + key + "'", where);
    }
  }
  NOSTRUM_CHECK(have_format, DataError, "manifest has no 'format nostrum-dataset 1' line", path);
  NOSTRUM_CHECK(declared_classes == static_cast<int64_t>(m.classes.size()), DataError,
                "manifest declares " + std::to_string(declared_classes) + " classes but lists " +
                    std::to_string(m.classes.size()),
                path);
  for (const SplitInfo& s : m.splits) {
    int64_t total = 0;
    for (const ShardInfo& shard : s.shards) total += shard.count;
    NOSTRUM_CHECK(total == s.count, DataError,
                  "split '" + s.name + "' declares " + std::to_string(s.count) +
                      " samples but its shards hold " + std::to_string(total),
                  path);
  }
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
