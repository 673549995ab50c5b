// nostrum-shards imagenet: an ImageFolder-style tree of JPEGs -> JPEG shards at original size
// (MLPerf closed division: no resizing). Every file is fully decoded once to reject bad inputs.
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "convert.hpp"
#include "io/jpeg.hpp"
#include "nostrum/core/error.hpp"

namespace nostrum::shards {

namespace fs = std::filesystem;

namespace {

struct InputFile {
  std::string path;
  int32_t label = 0;
  uint64_t size = 0;
};

// Sorted non-hidden entries of dir: its sub-directories (directories) or everything else. An entry
// whose type cannot be read (a link loop) is an error when listing classes, and counts as a file
// otherwise, so it fails, named, when it is opened. IoError naming dir if dir cannot be listed.
std::vector<std::string> list_files(const fs::path& dir, bool directories) {
  std::error_code ec;
  fs::directory_iterator it(dir, ec);
  NOSTRUM_CHECK(!ec, IoError, "cannot read directory: " + ec.message(), dir.string());
  std::vector<std::string> names;
  for (; it != fs::directory_iterator(); it.increment(ec)) {
    NOSTRUM_CHECK(!ec, IoError, "cannot read directory: " + ec.message(), dir.string());
    const std::string name = it->path().filename().string();
    if (name.empty() || name[0] == '.') continue;
    std::error_code type_error;
    const bool is_dir = fs::is_directory(it->path(), type_error);
    NOSTRUM_CHECK(!(directories && type_error), IoError, "cannot read: " + type_error.message(),
                  it->path().string(),
                  "a class folder whose type cannot be read makes the class list ambiguous");
    if (directories ? is_dir : !is_dir) names.push_back(name);
  }
  std::sort(names.begin(), names.end());
  return names;
}

uint64_t file_size(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 ? static_cast<uint64_t>(st.st_size) : 0;
}

// Files of class folders root/<class>/*; empty or unreadable folders are errors or skips.
void list_class_folders(const fs::path& root, const std::map<std::string, int32_t>& classes,
                        const ConvertOptions& options, std::vector<InputFile>& files,
                        std::vector<io::SkippedInput>& skipped) {
  for (const std::string& name : list_files(root, true)) {
    const auto found = classes.find(name);
    NOSTRUM_CHECK(found != classes.end(), DataError,
                  "class folder '" + name + "' is not a training class", (root / name).string());
    std::vector<std::string> names;
    try {
      names = list_files(root / name, false);
      NOSTRUM_CHECK(!names.empty(), DataError, "empty class folder", (root / name).string(),
                    "remove it or pass --skip-bad");
    } catch (const Error& e) {
      if (!options.skip_bad) throw;
      skipped.push_back({(root / name).string(), e.what_happened()});
      continue;
    }
    for (const std::string& file : names) {
      const std::string path = (root / name / file).string();
      files.push_back({path, found->second, file_size(path)});
    }
  }
}

// val/ flat with a label file: "<file>[,| ]<wnid> ..." per line; a header line "ImageId,..." is
// skipped.
void list_flat_val(const fs::path& root, const std::string& labels_path,
                   const std::map<std::string, int32_t>& classes, std::vector<InputFile>& files) {
  std::ifstream in(labels_path);
  NOSTRUM_CHECK(in.good(), IoError, "cannot open the validation label file", labels_path);
  const std::vector<std::string> present = list_files(root, false);
  std::map<std::string, std::string> by_stem;  // "ILSVRC2012_val_00000001" -> file name
  for (const std::string& name : present) by_stem[fs::path(name).stem().string()] = name;
  std::string line;
  int line_number = 0;
  while (std::getline(in, line)) {
    ++line_number;
    if (line.empty() || line.rfind("ImageId", 0) == 0) continue;
    std::replace(line.begin(), line.end(), ',', ' ');
    std::istringstream fields(line);
    std::string file, wnid;
    fields >> file >> wnid;
    const std::string where = labels_path + ":" + std::to_string(line_number);
    NOSTRUM_CHECK(!wnid.empty(), DataError, "expected '<file> <wnid>'", where);
    const auto cls = classes.find(wnid);
    NOSTRUM_CHECK(cls != classes.end(), DataError, "unknown class '" + wnid + "'", where);
    std::string name = file;
    if (!fs::exists(root / name)) {
      const auto stem = by_stem.find(fs::path(file).stem().string());
      NOSTRUM_CHECK(stem != by_stem.end(), IoError, "validation image not found",
                    (root / file).string());
      name = stem->second;
    }
    const std::string path = (root / name).string();
    files.push_back({path, cls->second, file_size(path)});
  }
  std::sort(files.begin(), files.end(),
            [](const InputFile& a, const InputFile& b) { return a.path < b.path; });
  NOSTRUM_CHECK(files.size() == present.size(), DataError,
                "the label file names " + std::to_string(files.size()) +
                    " images, the folder holds " + std::to_string(present.size()),
                labels_path);
}

// Cuts files into jobs of up to shard_mb / shard_images each; each job reads and checks its files.
void add_jobs(const std::string& split, const std::vector<InputFile>& files,
              const ConvertOptions& options, std::vector<ShardJob>& jobs) {
  const uint64_t max_bytes = static_cast<uint64_t>(options.shard_mb * 1e6);
  size_t begin = 0;
  while (begin < files.size()) {
    size_t end = begin;
    uint64_t bytes = 0;
    while (end < files.size() &&
           (end == begin || (bytes + files[end].size <= max_bytes &&
                             (options.shard_images <= 0 ||
                              static_cast<int64_t>(end - begin) < options.shard_images)))) {
      bytes += files[end].size;
      ++end;
    }
    const std::vector<InputFile>* all = &files;
    const bool skip_bad = options.skip_bad;
    jobs.push_back(
        {split, [all, begin, end, skip_bad](io::ShardContents& contents,
                                            std::vector<io::SkippedInput>& skipped) {
           io::JpegDecoder decoder;
           std::vector<uint8_t> bytes, pixels;
           contents.images.reserve(1 << 20);
           for (size_t i = begin; i < end; ++i) {
             const InputFile& f = (*all)[i];
             try {
               std::ifstream in(f.path, std::ios::binary);
               NOSTRUM_CHECK(in.good(), IoError,
                             std::string("cannot open: ") + std::strerror(errno), f.path);
               bytes.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
               NOSTRUM_CHECK(!in.bad(), IoError, "read error", f.path);
               int h = 0, w = 0;
               // Full entropy decode at 1/8 scale: catches corrupt and truncated files.
               decoder.decode_rgb(bytes.data(), bytes.size(), 8, pixels, h, w, f.path);
               contents.add(bytes.data(), bytes.size(), f.label);
             } catch (const Error& e) {
               if (!skip_bad) throw;
               skipped.push_back({f.path, e.what_happened()});
             }
           }
         }});
    begin = end;
  }
}

}  // namespace

io::Manifest convert_imagenet(const std::string& input, const std::string& val_labels,
                              const ConvertOptions& options) {
  const fs::path root(input);
  NOSTRUM_CHECK(fs::is_directory(root / "train"), IoError, "no train/ folder", input,
                "expected <input>/train/<wnid>/*.JPEG");
  io::Manifest manifest;
  manifest.kind = io::ImageKind::jpeg;
  manifest.channels = 3;
  manifest.mean = {0.485f, 0.456f, 0.406f};  // the ImageNet statistics every reference uses
  manifest.std = {0.229f, 0.224f, 0.225f};
  manifest.classes = list_files(root / "train", true);
  NOSTRUM_CHECK(!manifest.classes.empty(), DataError, "no class folders",
                (root / "train").string());
  std::map<std::string, int32_t> classes;
  for (size_t i = 0; i < manifest.classes.size(); ++i)
    classes[manifest.classes[i]] = static_cast<int32_t>(i);

  std::vector<std::string> splits{"train"};
  std::vector<InputFile> train, val;
  io::SplitInfo train_info{"train", 0, {}, {}}, val_info{"val", 0, {}, {}};
  list_class_folders(root / "train", classes, options, train, train_info.skipped);
  NOSTRUM_CHECK(!train.empty(), DataError, "no training images", (root / "train").string());
  const bool has_val = fs::is_directory(root / "val");
  if (has_val) {
    splits.push_back("val");
    if (!list_files(root / "val", true).empty()) {
      list_class_folders(root / "val", classes, options, val, val_info.skipped);
    } else {
      NOSTRUM_CHECK(!val_labels.empty(), OptionError, "val/ is flat: its labels are needed",
                    "--val-labels",
                    "a file of '<file> <wnid>' lines (or Kaggle's LOC_val_solution.csv)");
      list_flat_val(root / "val", val_labels, classes, val);
    }
  }
  manifest.splits.push_back(train_info);
  if (has_val) manifest.splits.push_back(val_info);
  prepare_output(options, splits);
  std::vector<ShardJob> jobs;
  add_jobs("train", train, options, jobs);
  add_jobs("val", val, options, jobs);
  return run_jobs(jobs, manifest, io::ImageKind::jpeg, options);
}

}  // namespace nostrum::shards
