// The conv kernel cache: measured choices kept on disk so that the next run on the same CPU skips
// the measurement. One JSON file per CPU, keyed inside by nostrum's version and the CPU (vendor,
// family, model, features), each entry by threads, precision, shape and pass, the whole file
// checksummed (core/hash.hpp). A file that fails any of these checks is refused by name, never
// trusted: its entries are measured again and the file rewritten.
#pragma once

#include <string>
#include <vector>

#include "nostrum/kernels/conv_choice.hpp"

namespace nostrum::kernels {

// nostrum's version, part of every cache key: the project version and a hash of the conv
// candidates' source code, "0.1.0+kernels.1a2b3c4d5e6f" (src/kernels/sources.cmake), so that a
// choice measured on other kernel code is measured again.
const char* nostrum_version();

// What identifies this CPU in the cache: "AuthenticAMD family 25 model 17 (...): avx2=yes ...",
// the features table's description (cpu_features(), after any ISA cap).
std::string conv_cache_cpu();

// $XDG_CACHE_HOME/nostrum/conv-kernels-<16 hex digits of conv_cache_cpu()'s hash>.json, with
// $HOME/.cache for an unset XDG_CACHE_HOME; "" when neither is set.
std::string default_conv_cache_path();

struct ConvCacheContents {
  std::vector<ConvChoice> rows;  // every entry of the file (any threads and precision)
  std::vector<int> threads;      // per row
  std::vector<Precision> precisions;
  std::string refused;  // why the file was not used (names it); "" when read or absent
};

// The file's entries, after checking format, version, CPU and checksum. A missing file is no
// error (empty contents); an unreadable, damaged or foreign one gives `refused` and no rows.
// `cpu` and `version` are what the file must carry (this process's, by default).
ConvCacheContents read_conv_cache(const std::string& path,
                                  const std::string& cpu = conv_cache_cpu(),
                                  const std::string& version = nostrum_version());

// The cached choice of one pass at these threads and precision, or nullptr.
const ConvChoice* find_cached(const ConvCacheContents& cache, const ConvPassShape& shape,
                              int threads, Precision precision);

// Writes `cache`'s rows plus the table's measured rows, atomically (a temporary file renamed over
// the old one; its directory created). A measured row of a shape `cache` has already replaces it
// only with `replace` (--conv-kernel measure); otherwise the first choice written stays, so runs
// sharing a cache keep one choice. Throws IoError naming the file.
void write_conv_cache(const std::string& path, ConvCacheContents cache,
                      const ConvChoiceTable& table, bool replace,
                      const std::string& cpu = conv_cache_cpu(),
                      const std::string& version = nostrum_version());

}  // namespace nostrum::kernels
