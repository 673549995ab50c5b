// Checkpoint files (see checkpoint.hpp): HDF5 layout, the checksum over the state, the atomic write
// (the file built in memory, written to a temporary file, fsync, rename, fsync of the directory),
// pruning, and the newest-valid search.
#include "io/checkpoint.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <mutex>

#include "io/hdf5_util.hpp"
#include "nostrum/core/error.hpp"
#include "nostrum/core/hash.hpp"

namespace nostrum::io {

namespace {

constexpr const char* kFormat = "nostrum-checkpoint";
constexpr const char* kPrefix = "checkpoint-";
constexpr const char* kSuffix = ".h5";
constexpr const char* kTempMarker = ".tmp-";

std::string hex(uint64_t v) {
  char text[17];
  std::snprintf(text, sizeof text, "%016" PRIx64, v);
  return text;
}

std::string system_reason(int code) {
  return std::strerror(code);
}

std::string shape_string(const std::vector<int64_t>& shape) {
  std::string s = "(";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + ")";
}

// ---- HDF5 writing ------------------------------------------------------------------------------

void write_double_attribute(hid_t object, const char* name, double value) {
  H5Handle space(H5Screate(H5S_SCALAR));
  H5Handle attr(H5Acreate2(object, name, H5T_IEEE_F64LE, space.get(), H5P_DEFAULT, H5P_DEFAULT));
  NOSTRUM_CHECK(attr.valid() && H5Awrite(attr.get(), H5T_NATIVE_DOUBLE, &value) >= 0, IoError,
                std::string("cannot write HDF5 attribute ") + name);
}

double read_double_attribute(hid_t object, const char* name, const std::string& where) {
  NOSTRUM_CHECK(H5Aexists(object, name) > 0, DataError,
                std::string("missing attribute '") + name + "'", where);
  H5Handle attr(H5Aopen(object, name, H5P_DEFAULT));
  double value = 0;
  NOSTRUM_CHECK(H5Aread(attr.get(), H5T_NATIVE_DOUBLE, &value) >= 0, DataError,
                std::string("cannot read attribute '") + name + "'", where);
  return value;
}

H5Handle create_group(hid_t parent, const char* name) {
  H5Handle group(H5Gcreate2(parent, name, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT));
  NOSTRUM_CHECK(group.valid(), IoError, std::string("cannot create HDF5 group ") + name);
  return group;
}

H5Handle open_group(hid_t parent, const char* name, const std::string& where) {
  NOSTRUM_CHECK(H5Lexists(parent, name, H5P_DEFAULT) > 0, DataError,
                std::string("missing group '") + name + "'", where);
  H5Handle group(H5Gopen2(parent, name, H5P_DEFAULT));
  NOSTRUM_CHECK(group.valid(), IoError, std::string("cannot open group '") + name + "'", where);
  return group;
}

// A 1-D (or given-shape) dataset of file_type; count may be 0.
void write_array(hid_t parent, const char* name, hid_t file_type, hid_t mem_type,
                 const std::vector<hsize_t>& dims, const void* data) {
  H5Handle space(dims.empty()
                     ? H5Screate(H5S_SCALAR)
                     : H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr));
  H5Handle set(
      H5Dcreate2(parent, name, file_type, space.get(), H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT));
  NOSTRUM_CHECK(set.valid(), IoError, std::string("cannot create HDF5 dataset ") + name);
  hsize_t total = 1;
  for (hsize_t d : dims) total *= d;
  if (total == 0) return;
  NOSTRUM_CHECK(H5Dwrite(set.get(), mem_type, H5S_ALL, H5S_ALL, H5P_DEFAULT, data) >= 0, IoError,
                std::string("cannot write HDF5 dataset ") + name);
}

// Reads a whole dataset of any shape as mem_type; returns its dims.
template <typename T>
std::vector<hsize_t> read_array(hid_t parent, const char* name, hid_t mem_type, std::vector<T>& out,
                                const std::string& where) {
  NOSTRUM_CHECK(H5Lexists(parent, name, H5P_DEFAULT) > 0, DataError,
                std::string("missing dataset '") + name + "'", where);
  H5Handle set(H5Dopen2(parent, name, H5P_DEFAULT));
  NOSTRUM_CHECK(set.valid(), IoError, std::string("cannot open dataset '") + name + "'", where);
  H5Handle space(H5Dget_space(set.get()));
  const int rank = H5Sget_simple_extent_ndims(space.get());
  NOSTRUM_CHECK(rank >= 0, DataError, std::string("bad dataspace of '") + name + "'", where);
  std::vector<hsize_t> dims(static_cast<size_t>(rank));
  if (rank > 0) H5Sget_simple_extent_dims(space.get(), dims.data(), nullptr);
  hsize_t total = 1;
  for (hsize_t d : dims) total *= d;
  out.assign(static_cast<size_t>(total), T{});
  if (total > 0)
    NOSTRUM_CHECK(H5Dread(set.get(), mem_type, H5S_ALL, H5S_ALL, H5P_DEFAULT, out.data()) >= 0,
                  IoError, std::string("cannot read dataset '") + name + "' (damaged file?)",
                  where);
  return dims;
}

herr_t collect_link(hid_t, const char* name, const H5L_info_t*, void* out) {
  static_cast<std::vector<std::string>*>(out)->push_back(name);
  return 0;
}

herr_t collect_attribute(hid_t, const char* name, const H5A_info_t*, void* out) {
  static_cast<std::vector<std::string>*>(out)->push_back(name);
  return 0;
}

// The names of every attribute of `object`, in name order.
std::vector<std::string> attribute_names(hid_t object) {
  std::vector<std::string> names;
  H5Aiterate2(object, H5_INDEX_NAME, H5_ITER_INC, nullptr, collect_attribute, &names);
  return names;
}

void write_identity(hid_t file, const CheckpointIdentity& id) {
  H5Handle g = create_group(file, "identity");
  write_attribute(g.get(), "model", id.model);
  write_attribute(g.get(), "dataset", id.dataset);
  write_attribute(g.get(), "train_samples", id.train_samples);
  write_attribute(g.get(), "eval_samples", id.eval_samples);
  write_attribute(g.get(), "global_batch", id.global_batch);
}

CheckpointIdentity read_identity(hid_t file, const std::string& path) {
  H5Handle g = open_group(file, "identity", path);
  CheckpointIdentity id;
  id.model = read_string_attribute(g.get(), "model", path);
  id.dataset = read_string_attribute(g.get(), "dataset", path);
  id.train_samples = read_int_attribute(g.get(), "train_samples", path);
  id.eval_samples = read_int_attribute(g.get(), "eval_samples", path);
  id.global_batch = read_int_attribute(g.get(), "global_batch", path);
  return id;
}

// /run: the options text, the evaluations (n x 3: epoch, accuracy, seconds), and the run's
// scalars as they are, integers and reals in a group each.
void write_run(hid_t file, const CheckpointState& s) {
  H5Handle g = create_group(file, "run");
  const std::string& opts = s.options_text;
  write_array(g.get(), "options", H5T_STD_U8LE, H5T_NATIVE_UCHAR, {opts.size()}, opts.data());
  std::vector<double> evals;
  for (const auto& e : s.evals)
    evals.insert(evals.end(),
                 {static_cast<double>(e.epoch), e.accuracy, e.seconds_since_run_start});
  write_array(g.get(), "evals", H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE, {s.evals.size(), 3},
              evals.data());
  H5Handle integers = create_group(g.get(), "integers");
  for (const auto& [name, value] : s.integers) write_attribute(integers.get(), name.c_str(), value);
  H5Handle reals = create_group(g.get(), "reals");
  for (const auto& [name, value] : s.reals)
    write_double_attribute(reals.get(), name.c_str(), value);
}

void read_run(hid_t file, const std::string& path, CheckpointState& s) {
  H5Handle g = open_group(file, "run", path);
  std::vector<unsigned char> opts;
  read_array(g.get(), "options", H5T_NATIVE_UCHAR, opts, path);
  s.options_text.assign(opts.begin(), opts.end());
  std::vector<double> evals;
  const auto dims = read_array(g.get(), "evals", H5T_NATIVE_DOUBLE, evals, path);
  NOSTRUM_CHECK(dims.size() == 2 && dims[1] == 3, DataError, "/run/evals is not (n, 3)", path);
  for (size_t i = 0; i + 3 <= evals.size(); i += 3)
    s.evals.push_back({static_cast<int64_t>(evals[i]), evals[i + 1], evals[i + 2]});
  H5Handle integers = open_group(g.get(), "integers", path);
  for (const auto& name : attribute_names(integers.get()))
    s.integers[name] = read_int_attribute(integers.get(), name.c_str(), path);
  H5Handle reals = open_group(g.get(), "reals", path);
  for (const auto& name : attribute_names(reals.get()))
    s.reals[name] = read_double_attribute(reals.get(), name.c_str(), path);
}

// /model/<key> in the weights-file layout, and /model_order: the keys in table order (HDF5 lists
// links by name only).
void write_model(hid_t file, const std::vector<NamedTensor>& model) {
  H5Handle g = create_group(file, "model");
  std::string order;
  for (const auto& t : model) {
    std::vector<hsize_t> dims(t.shape.begin(), t.shape.end());
    int64_t numel = 1;
    for (int64_t d : t.shape) numel *= d;
    NOSTRUM_CHECK(numel == static_cast<int64_t>(t.values.size()), DataError,
                  "tensor '" + t.name + "' has " + std::to_string(t.values.size()) +
                      " values for shape " + shape_string(t.shape));
    write_array(g.get(), t.name.c_str(), H5T_IEEE_F32LE, H5T_NATIVE_FLOAT, dims, t.values.data());
    order += t.name + "\n";
  }
  if (!order.empty()) order.pop_back();
  write_array(file, "model_order", H5T_STD_U8LE, H5T_NATIVE_UCHAR, {order.size()}, order.data());
}

std::vector<std::string> read_model_order(hid_t file, const std::string& path) {
  std::vector<unsigned char> text;
  read_array(file, "model_order", H5T_NATIVE_UCHAR, text, path);
  const std::string all(text.begin(), text.end());
  std::vector<std::string> order;
  for (size_t start = 0; start < all.size();) {
    const size_t end = all.find('\n', start);
    order.push_back(all.substr(start, end - start));
    start = end == std::string::npos ? all.size() : end + 1;
  }
  return order;
}

std::vector<NamedTensor> read_model(hid_t file, const std::string& path) {
  H5Handle g = open_group(file, "model", path);
  std::vector<std::string> names;
  H5Literate(g.get(), H5_INDEX_NAME, H5_ITER_INC, nullptr, collect_link, &names);
  const std::vector<std::string> order = read_model_order(file, path);
  std::vector<std::string> sorted_order = order;
  std::sort(names.begin(), names.end());
  std::sort(sorted_order.begin(), sorted_order.end());
  NOSTRUM_CHECK(names == sorted_order, DataError,
                "/model does not hold the tensors listed in /model_order", path);
  std::vector<NamedTensor> model;
  for (const auto& name : order) {
    NamedTensor t;
    t.name = name;
    const auto dims = read_array(g.get(), name.c_str(), H5T_NATIVE_FLOAT, t.values, path);
    t.shape.assign(dims.begin(), dims.end());
    model.push_back(std::move(t));
  }
  return model;
}

void write_optimizer(hid_t file, const CheckpointState& s) {
  H5Handle g = create_group(file, "optimizer");
  write_attribute(g.get(), "name", s.optimizer_name);
  write_attribute(g.get(), "steps_taken", s.optimizer_steps);
  write_array(g.get(), "state", H5T_IEEE_F32LE, H5T_NATIVE_FLOAT, {s.optimizer_state.size()},
              s.optimizer_state.data());
}

void read_optimizer(hid_t file, const std::string& path, CheckpointState& s) {
  H5Handle g = open_group(file, "optimizer", path);
  s.optimizer_name = read_string_attribute(g.get(), "name", path);
  s.optimizer_steps = read_int_attribute(g.get(), "steps_taken", path);
  read_array(g.get(), "state", H5T_NATIVE_FLOAT, s.optimizer_state, path);
}

void write_state(hid_t file, const CheckpointState& s) {
  write_attribute(file, "format", std::string(kFormat));
  write_attribute(file, "format_version", int64_t{1});  // /model's layout, as weights files read it
  write_attribute(file, "checkpoint_version", int64_t{kCheckpointFormatVersion});
  write_attribute(file, "model", s.identity.model);  // as in weights files
  write_attribute(file, "checksum", hex(checkpoint_checksum(s)));
  write_identity(file, s.identity);
  write_run(file, s);
  write_model(file, s.model);
  write_optimizer(file, s);
  write_array(file, "rank_buffers", H5T_IEEE_F32LE, H5T_NATIVE_FLOAT, {s.rank_buffers.size()},
              s.rank_buffers.data());
}

// The format and its version: another file, or a version this build cannot read, is refused
// by name before anything else is read.
void check_format(hid_t file, const std::string& path) {
  const std::string format = read_string_attribute(file, "format", path);
  NOSTRUM_CHECK(format == kFormat, DataError, "not a nostrum checkpoint (format '" + format + "')",
                path);
  // Version 1 had no checkpoint_version attribute (its format_version said 1).
  const int64_t version = H5Aexists(file, "checkpoint_version") > 0
                              ? read_int_attribute(file, "checkpoint_version", path)
                              : 1;
  NOSTRUM_CHECK(version != 1, DataError,
                "checkpoint format version 1 (written by an earlier nostrum, with another layout "
                "of /run and another checksum) cannot be resumed by this build, which reads "
                "version " +
                    std::to_string(kCheckpointFormatVersion),
                path,
                "finish that run with the nostrum that wrote it, or start afresh (the weights "
                "in /model still load with --init-weights)");
  NOSTRUM_CHECK(version == kCheckpointFormatVersion, DataError,
                "checkpoint format version " + std::to_string(version) +
                    " is not supported (this build reads version " +
                    std::to_string(kCheckpointFormatVersion) + ")",
                path);
}

CheckpointState read_state(hid_t file, const std::string& path) {
  check_format(file, path);
  CheckpointState s;
  s.identity = read_identity(file, path);
  read_run(file, path, s);
  s.model = read_model(file, path);
  read_optimizer(file, path, s);
  read_array(file, "rank_buffers", H5T_NATIVE_FLOAT, s.rank_buffers, path);
  const std::string stored = read_string_attribute(file, "checksum", path);
  const std::string computed = hex(checkpoint_checksum(s));
  NOSTRUM_CHECK(
      stored == computed, DataError,
      "checksum mismatch (stored " + stored + ", computed " + computed + "): the file is damaged",
      path);
  return s;
}

// The raw data's bytes plus room for the metadata: the in-memory file's growth step, so that it
// is allocated about once.
size_t image_size_estimate(const CheckpointState& s) {
  size_t floats = s.optimizer_state.size() + s.rank_buffers.size();
  for (const auto& t : s.model) floats += t.values.size();
  return floats * sizeof(float) + s.options_text.size() + s.evals.size() * 3 * sizeof(double) +
         (size_t{1} << 20);
}

// The checkpoint file's bytes, built in memory: a full disk then fails the plain write of these
// bytes (write_file), never an HDF5 write or close (a close whose metadata flush fails leaves, on
// HDF5 1.10.8, a file id that HDF5's exit handler crashes on).
std::vector<unsigned char> checkpoint_image(const CheckpointState& state, const std::string& name) {
  std::lock_guard<std::mutex> lock(hdf5_mutex());
  H5Quiet quiet;
  H5Handle file = create_memory_file(name, image_size_estimate(state));
  write_state(file.get(), state);
  return file_image(file.get(), name);
}

// Writes bytes into a new file at path and fsyncs it; IoError with the system's reason.
void write_file(const std::string& path, const std::vector<unsigned char>& bytes) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  NOSTRUM_CHECK(fd >= 0, IoError, "cannot create the checkpoint file: " + system_reason(errno),
                path, "is the checkpoint directory writable?");
  int code = 0;
  for (size_t done = 0; done < bytes.size() && code == 0;) {
    const ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n > 0)
      done += static_cast<size_t>(n);
    else if (n == 0 || errno != EINTR)
      code = n == 0 ? ENOSPC : errno;
  }
  if (code == 0 && ::fsync(fd) != 0) code = errno;
  if (::close(fd) != 0 && code == 0) code = errno;
  NOSTRUM_CHECK(code == 0, IoError, "cannot write the checkpoint file: " + system_reason(code),
                path);
}

void fsync_path(const std::string& path, bool directory) {
  const int fd = ::open(path.c_str(), directory ? (O_RDONLY | O_DIRECTORY) : O_RDONLY);
  NOSTRUM_CHECK(fd >= 0, IoError, "cannot open for fsync: " + system_reason(errno), path);
  const int rc = ::fsync(fd);
  const int code = errno;
  ::close(fd);
  NOSTRUM_CHECK(rc == 0, IoError, "fsync failed: " + system_reason(code), path,
                "is the file system full or read-only?");
}

bool is_checkpoint_name(const std::string& name) {
  const size_t p = std::strlen(kPrefix), s = std::strlen(kSuffix);
  return name.size() > p + s && name.compare(0, p, kPrefix) == 0 &&
         name.compare(name.size() - s, s, kSuffix) == 0 &&
         name.find(kTempMarker) == std::string::npos;
}

std::vector<std::string> directory_entries(const std::string& dir) {
  std::vector<std::string> names;
  DIR* d = ::opendir(dir.c_str());
  NOSTRUM_CHECK(d != nullptr, IoError, "cannot list checkpoint directory: " + system_reason(errno),
                dir);
  while (dirent* e = ::readdir(d)) names.emplace_back(e->d_name);
  ::closedir(d);
  return names;
}

}  // namespace

std::vector<NamedTensor> capture_tensors(const ParameterTable& table) {
  std::vector<NamedTensor> out;
  out.reserve(table.size());
  for (const auto& p : table) {
    NamedTensor t;
    t.name = p.name;
    for (int i = 0; i < p.shape.rank(); ++i) t.shape.push_back(p.shape[i]);
    t.values.assign(p.value, p.value + p.numel());
    out.push_back(std::move(t));
  }
  return out;
}

void restore_tensors(const std::vector<NamedTensor>& tensors, ParameterTable& table,
                     const std::string& where) {
  NOSTRUM_CHECK(tensors.size() == table.size(), DataError,
                "checkpoint holds " + std::to_string(tensors.size()) + " tensors, the model has " +
                    std::to_string(table.size()),
                where, "was it written by another model?");
  for (size_t i = 0; i < table.size(); ++i) {
    Parameter& p = table[i];
    const NamedTensor& t = tensors[i];
    NOSTRUM_CHECK(t.name == p.name, DataError,
                  "checkpoint tensor " + std::to_string(i) + " is '" + t.name +
                      "', the model's is '" + p.name + "'",
                  where, "was it written by another model?");
    std::vector<int64_t> shape;
    for (int d = 0; d < p.shape.rank(); ++d) shape.push_back(p.shape[d]);
    NOSTRUM_CHECK(
        t.shape == shape, ShapeError,
        "shape " + shape_string(t.shape) + " in the checkpoint, the model needs " + p.shape.str(),
        where + ": /model/" + p.name);
    std::copy(t.values.begin(), t.values.end(), p.value);
  }
}

uint64_t checkpoint_checksum(const CheckpointState& s) {
  Hash64 h(kCheckpointFormatVersion);
  h.text(s.identity.model).text(s.identity.dataset);
  h.integer(s.identity.train_samples).integer(s.identity.eval_samples);
  h.integer(s.identity.global_batch);
  h.text(s.options_text);
  h.integer(static_cast<int64_t>(s.integers.size()));
  for (const auto& [name, value] : s.integers) h.text(name).integer(value);
  h.integer(static_cast<int64_t>(s.reals.size()));
  for (const auto& [name, value] : s.reals) h.text(name).real(value);
  h.integer(static_cast<int64_t>(s.evals.size()));
  for (const auto& e : s.evals) h.integer(e.epoch).real(e.accuracy).real(e.seconds_since_run_start);
  h.integer(static_cast<int64_t>(s.model.size()));
  for (const auto& t : s.model) {
    h.text(t.name).integer(static_cast<int64_t>(t.shape.size()));
    for (int64_t d : t.shape) h.integer(d);
    h.bytes(t.values.data(), t.values.size() * sizeof(float));
  }
  h.text(s.optimizer_name).integer(s.optimizer_steps);
  h.integer(static_cast<int64_t>(s.optimizer_state.size()));
  h.bytes(s.optimizer_state.data(), s.optimizer_state.size() * sizeof(float));
  h.integer(static_cast<int64_t>(s.rank_buffers.size()));
  h.bytes(s.rank_buffers.data(), s.rank_buffers.size() * sizeof(float));
  return h.value();
}

std::string checkpoint_file_name(int64_t steps_taken) {
  char text[64];
  std::snprintf(text, sizeof text, "%s%012" PRId64 "%s", kPrefix, steps_taken, kSuffix);
  return text;
}

void check_checkpoint_dir(const std::string& dir) {
  NOSTRUM_CHECK(!dir.empty(), OptionError, "the checkpoint directory is empty", "--checkpoint-dir");
  struct stat st {};
  if (::stat(dir.c_str(), &st) != 0) {
    NOSTRUM_CHECK(::mkdir(dir.c_str(), 0777) == 0 || errno == EEXIST, IoError,
                  "cannot create the checkpoint directory: " + system_reason(errno), dir,
                  "create it, or give --checkpoint-dir a writable place");
  } else {
    NOSTRUM_CHECK(S_ISDIR(st.st_mode), IoError, "the checkpoint path is not a directory", dir,
                  "give --checkpoint-dir a directory");
  }
  // Prove it writable with real bytes (a permission check alone misses a full or read-only disk).
  const std::string probe = dir + "/.nostrum-write-probe-" + std::to_string(::getpid());
  const int fd = ::open(probe.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  NOSTRUM_CHECK(fd >= 0, IoError,
                "the checkpoint directory is not writable: " + system_reason(errno), dir,
                "fix its permissions or give --checkpoint-dir a writable place");
  std::vector<char> bytes(64 * 1024, 'x');
  const ssize_t written = ::write(fd, bytes.data(), bytes.size());
  int code = errno;
  const bool synced = written == static_cast<ssize_t>(bytes.size()) && ::fsync(fd) == 0;
  if (written == static_cast<ssize_t>(bytes.size())) code = errno;
  ::close(fd);
  ::unlink(probe.c_str());
  NOSTRUM_CHECK(synced, IoError,
                "cannot write to the checkpoint directory: " +
                    (written >= 0 && written < static_cast<ssize_t>(bytes.size())
                         ? std::string("no space left on device")
                         : system_reason(code)),
                dir, "free space there or give --checkpoint-dir another place");
}

std::string write_checkpoint(const std::string& dir, const CheckpointState& state, int keep) {
  const auto steps = state.integers.find(kStepsTakenKey);
  NOSTRUM_CHECK(
      steps != state.integers.end(), DataError,
      std::string("checkpoint state has no integer '") + kStepsTakenKey + "' (it names the file)",
      dir);
  const std::string name = checkpoint_file_name(steps->second);
  const std::string path = dir + "/" + name;
  const std::string temp = path + kTempMarker + std::to_string(::getpid());
  ::unlink(temp.c_str());
  try {
    write_file(temp, checkpoint_image(state, temp));
    read_checkpoint(temp);  // read back and verify the checksum before it replaces anything
  } catch (const Error& e) {
    ::unlink(temp.c_str());
    throw IoError("cannot write checkpoint: " + e.what_happened(), path,
                  "is the checkpoint directory full or read-only? the earlier checkpoints are "
                  "untouched");
  }
  if (::rename(temp.c_str(), path.c_str()) != 0) {
    const int code = errno;
    ::unlink(temp.c_str());
    throw IoError("cannot rename the checkpoint into place: " + system_reason(code), path);
  }
  fsync_path(dir, true);

  // Prune: the newest `keep` stay; leftover temporary files of killed writers go.
  const std::vector<std::string> existing = list_checkpoints(dir);
  if (keep > 0)
    for (size_t i = static_cast<size_t>(keep); i < existing.size(); ++i)
      if (existing[i] != path) ::unlink(existing[i].c_str());
  for (const auto& entry : directory_entries(dir))
    if (entry.rfind(kPrefix, 0) == 0 && entry.find(kTempMarker) != std::string::npos)
      ::unlink((dir + "/" + entry).c_str());
  return path;
}

CheckpointState read_checkpoint(const std::string& path) {
  std::lock_guard<std::mutex> lock(hdf5_mutex());
  H5Quiet quiet;
  struct stat st {};
  NOSTRUM_CHECK(::stat(path.c_str(), &st) == 0, IoError,
                "cannot read checkpoint: " + system_reason(errno), path);
  NOSTRUM_CHECK(H5Fis_hdf5(path.c_str()) > 0, IoError,
                "not a readable HDF5 file (truncated or damaged checkpoint)", path);
  H5Handle file(H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT));
  NOSTRUM_CHECK(file.valid(), IoError, "cannot open checkpoint (truncated or damaged)", path);
  return read_state(file.get(), path);
}

std::string checkpoint_mismatch(const CheckpointState& state, const CheckpointIdentity& e) {
  const CheckpointIdentity& c = state.identity;
  if (c.model != e.model)
    return "written by another model ('" + c.model + "'; this run trains '" + e.model + "')";
  if (c.dataset != e.dataset || c.train_samples != e.train_samples ||
      c.eval_samples != e.eval_samples)
    return "written for another dataset ('" + c.dataset + "', " + std::to_string(c.train_samples) +
           " train / " + std::to_string(c.eval_samples) + " eval samples; this run reads '" +
           e.dataset + "', " + std::to_string(e.train_samples) + " / " +
           std::to_string(e.eval_samples) + ")";
  if (c.global_batch != e.global_batch)
    return "written with another global batch (" + std::to_string(c.global_batch) +
           "; this run's is " + std::to_string(e.global_batch) +
           "): the LR schedule and the sampler's position are counted in global batches, so "
           "resume with ranks x --batch-size = " +
           std::to_string(c.global_batch);
  return {};
}

CheckpointState load_checkpoint(const std::string& path, const CheckpointIdentity& expected) {
  CheckpointState state = read_checkpoint(path);
  const std::string why = checkpoint_mismatch(state, expected);
  NOSTRUM_CHECK(why.empty(), DataError, "checkpoint refused: " + why, path);
  return state;
}

std::vector<std::string> list_checkpoints(const std::string& dir) {
  std::vector<std::string> names;
  for (const auto& entry : directory_entries(dir))
    if (is_checkpoint_name(entry)) names.push_back(entry);
  std::sort(names.rbegin(), names.rend());  // zero-padded step counts: newest first
  for (auto& n : names) n = dir + "/" + n;
  return names;
}

FoundCheckpoint find_latest_checkpoint(const std::string& dir, const CheckpointIdentity& expected) {
  FoundCheckpoint found;
  for (const auto& path : list_checkpoints(dir)) {
    try {
      found.state = load_checkpoint(path, expected);
      found.path = path;
      return found;
    } catch (const Error& e) {
      found.refused.push_back(path + ": " + e.what_happened());
    }
  }
  found.state = CheckpointState{};
  return found;
}

}  // namespace nostrum::io
