// nostrum-shards: converts image datasets into nostrum's HDF5 shard format (imagenet,
// fashion-mnist, synthetic), verifies shard checksums (verify) and benchmarks the input pipeline
// (bench).
#include <boost/program_options.hpp>
#include <cstdio>
#include <iostream>
#include <sstream>

#include "bench.hpp"
#include "convert.hpp"
#include "nostrum/core/error.hpp"

namespace po = boost::program_options;
using namespace nostrum;

namespace {

const char* kUsage =
    "usage: nostrum-shards <command> [options]\n"
    "commands:\n"
    "  imagenet       ImageNet-style tree (train/<wnid>/*.JPEG, val/) -> JPEG shards\n"
    "  fashion-mnist  Fashion-MNIST idx(.gz) files -> raw 28x28x1 shards\n"
    "  synthetic      generated images with a learnable class signal (JPEG or raw)\n"
    "  verify         check every shard's payload checksum of a dataset\n"
    "  bench          input-pipeline throughput and data-wait fraction\n"
    "nostrum-shards <command> --help lists the command's options.\n";

po::options_description convert_options(shards::ConvertOptions& o) {
  po::options_description d("output");
  d.add_options()("output,o", po::value(&o.output)->required(), "dataset directory to create")(
      "shard-mb", po::value(&o.shard_mb)->default_value(128),
      "close a shard at this payload size (MB)")("shard-images",
                                                 po::value(&o.shard_images)->default_value(0),
                                                 "close a shard at this many images (0: no limit)")(
      "threads,j", po::value(&o.threads)->default_value(0), "converter threads (0: all cores)")(
      "skip-bad", po::bool_switch(&o.skip_bad),
      "skip bad inputs (counted, listed in the manifest) instead of failing")(
      "overwrite", po::bool_switch(&o.overwrite), "replace an existing dataset in --output")(
      "quiet,q", po::bool_switch(&o.quiet), "no progress lines");
  return d;
}

// Parses args into the options; returns false after printing help.
bool parse(const std::vector<std::string>& args, const po::options_description& options,
           const std::string& command, const po::positional_options_description& positional = {}) {
  po::options_description all(options);
  all.add_options()("help,h", "this help");
  po::variables_map vm;
  try {
    po::store(po::command_line_parser(args).options(all).positional(positional).run(), vm);
    if (vm.count("help")) {
      std::cout << "usage: nostrum-shards " << command << " [options]\n" << all;
      return false;
    }
    po::notify(vm);
  } catch (const po::error& e) {
    std::ostringstream help;
    help << all;
    throw OptionError(e.what(), "nostrum-shards " + command, "valid options:\n" + help.str());
  }
  return true;
}

std::vector<int> parse_int_list(const std::string& text, const std::string& option) {
  std::vector<int> values;
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) {
    try {
      values.push_back(std::stoi(item));
    } catch (...) {
      throw OptionError("not a list of integers: '" + text + "'", option);
    }
    NOSTRUM_CHECK(values.back() > 0, OptionError, "values must be positive", option);
  }
  NOSTRUM_CHECK(!values.empty(), OptionError, "empty list", option);
  return values;
}

void report(const io::Manifest& m, const shards::ConvertOptions& o) {
  for (const io::SplitInfo& s : m.splits) {
    std::printf("nostrum-shards: %s: %lld images in %zu shards, %zu skipped\n", s.name.c_str(),
                static_cast<long long>(s.count), s.shards.size(), s.skipped.size());
    for (const io::SkippedInput& skip : s.skipped)
      std::printf("  skipped %s: %s\n", skip.path.c_str(), skip.reason.c_str());
  }
  std::printf("nostrum-shards: wrote %s/%s (%zu classes)\n", o.output.c_str(), io::kManifestName,
              m.classes.size());
}

int run(int argc, char** argv) {
  if (argc < 2 || std::string(argv[1]) == "--help" || std::string(argv[1]) == "-h") {
    std::fputs(kUsage, argc < 2 ? stderr : stdout);
    return argc < 2 ? 2 : 0;
  }
  const std::string command = argv[1];
  const std::vector<std::string> args(argv + 2, argv + argc);
  shards::ConvertOptions convert;
  if (command == "imagenet") {
    std::string input, val_labels;
    po::options_description d("imagenet");
    d.add_options()("input,i", po::value(&input)->required(),
                    "root holding train/<wnid>/ and val/")(
        "val-labels", po::value(&val_labels),
        "labels of a flat val/: '<file> <wnid>' lines or LOC_val_solution.csv");
    d.add(convert_options(convert));
    if (!parse(args, d, command)) return 0;
    report(shards::convert_imagenet(input, val_labels, convert), convert);
  } else if (command == "fashion-mnist") {
    std::string input = "/usr/share/datasets/fashion-mnist";
    po::options_description d("fashion-mnist");
    d.add_options()("input,i", po::value(&input)->default_value(input),
                    "folder of {train,t10k}-*-idx*-ubyte[.gz]");
    d.add(convert_options(convert));
    if (!parse(args, d, command)) return 0;
    report(shards::convert_fashion_mnist(input, convert), convert);
  } else if (command == "synthetic") {
    shards::SyntheticOptions s;
    std::string kind = "jpeg";
    po::options_description d("synthetic");
    d.add_options()("classes", po::value(&s.classes)->default_value(s.classes),
                    "number of classes")("train", po::value(&s.train)->default_value(s.train),
                                         "training images")(
        "val", po::value(&s.val)->default_value(s.val), "validation images")(
        "height", po::value(&s.height)->default_value(s.height), "image height")(
        "width", po::value(&s.width)->default_value(s.width), "image width")(
        "channels", po::value(&s.channels)->default_value(s.channels), "1 or 3")(
        "kind", po::value(&kind)->default_value(kind), "jpeg or raw")(
        "size-jitter", po::value(&s.size_jitter)->default_value(s.size_jitter),
        "jpeg: sides vary by this fraction")(
        "quality", po::value(&s.quality)->default_value(s.quality), "jpeg quality")(
        "seed", po::value(&s.seed)->default_value(s.seed), "generator seed");
    d.add(convert_options(convert));
    if (!parse(args, d, command)) return 0;
    NOSTRUM_CHECK(kind == "jpeg" || kind == "raw", OptionError, "unknown kind '" + kind + "'",
                  "--kind", "jpeg or raw");
    s.kind = kind == "jpeg" ? io::ImageKind::jpeg : io::ImageKind::raw;
    report(shards::convert_synthetic(s, convert), convert);
  } else if (command == "verify") {
    std::string data;
    int threads = 0;
    po::options_description d("verify");
    d.add_options()("data,d", po::value(&data)->required(), "dataset directory")(
        "threads,j", po::value(&threads)->default_value(0), "threads (0: all cores)");
    po::positional_options_description p;
    p.add("data", 1);
    if (!parse(args, d, command, p)) return 0;
    const int64_t samples = shards::verify_dataset(data, threads);
    std::printf("nostrum-shards: %s: all shards intact (%lld samples)\n", data.c_str(),
                static_cast<long long>(samples));
  } else if (command == "bench") {
    shards::BenchOptions b;
    std::string threads = "1,2";
    po::options_description d("bench");
    d.add_options()("data,d", po::value(&b.data)->required(), "dataset directory")(
        "split", po::value(&b.split)->default_value(b.split), "split to read")(
        "batch", po::value(&b.batch)->default_value(b.batch), "local batch size")(
        "threads,j", po::value(&threads)->default_value(threads),
        "loader thread counts to try, e.g. 1,2")("size", po::value(&b.size)->default_value(b.size),
                                                 "JPEG output size (square)")(
        "eval", po::bool_switch(&b.eval), "evaluation transform")(
        "batches", po::value(&b.batches)->default_value(b.batches),
        "batches timed per configuration")("step-ms",
                                           po::value(&b.step_ms)->default_value(b.step_ms),
                                           "simulated training step per batch (busy, ms)");
    if (!parse(args, d, command)) return 0;
    b.threads = parse_int_list(threads, "--threads");
    shards::run_bench(b);
  } else {
    throw OptionError("unknown command '" + command + "'", "nostrum-shards",
                      "one of imagenet, fashion-mnist, synthetic, verify, bench");
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const Error& e) {
    std::fprintf(stderr, "nostrum-shards: error: %s\n", e.what());
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "nostrum-shards: error: %s\n", e.what());
    return 1;
  }
}
