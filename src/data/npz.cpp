// .npz archives (libzip) and the dataset of their arrays; the arrays
// themselves are parsed by npy.cpp.
#include <sys/stat.h>
#include <zip.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <set>

#include "data/npy.h"
#include "io/atomic_file.h"
#include "trainstep/error.h"

namespace ts {

namespace {

bool ends_with(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

// ---- zip -------------------------------------------------------------------

std::string zip_error_text(int code) {
  zip_error_t e;
  zip_error_init_with_code(&e, code);
  std::string s = zip_error_strerror(&e);
  zip_error_fini(&e);
  return s;
}

struct ZipCloser {
  void operator()(zip_t* z) const { zip_discard(z); }
};
struct ZipFileCloser {
  void operator()(zip_file_t* f) const { zip_fclose(f); }
};
using ZipPtr = std::unique_ptr<zip_t, ZipCloser>;
using ZipFilePtr = std::unique_ptr<zip_file_t, ZipFileCloser>;

std::vector<std::pair<std::string, NpyArray>> read_members(zip_t* za, const std::string& where) {
  const zip_int64_t count = zip_get_num_entries(za, 0);
  if (count < 0) fail(where + ": not a readable zip archive: " + zip_strerror(za));
  std::vector<std::pair<std::string, NpyArray>> out;
  std::set<std::string> seen;
  std::vector<uint8_t> chunk(1 << 16);
  for (zip_int64_t i = 0; i < count; ++i) {
    zip_stat_t st;
    zip_stat_init(&st);
    if (zip_stat_index(za, static_cast<zip_uint64_t>(i), 0, &st) != 0)
      fail(where + ": corrupt zip entry " + std::to_string(i) + ": " + zip_strerror(za));
    if (!(st.valid & ZIP_STAT_NAME) || !st.name)
      fail(where + ": zip entry " + std::to_string(i) + " has no name");
    const std::string member = st.name;
    const std::string at = where + ", member " + printable(member);
    if (ends_with(member, "/")) continue;  // a folder
    if (!ends_with(member, ".npy") || member.size() == 4)
      fail(at + ": not a NAME.npy array (a .npz holds only .npy members)");
    const std::string name = member.substr(0, member.size() - 4);
    if (!seen.insert(name).second) fail(at + ": a second member of that name");
    if (!(st.valid & ZIP_STAT_SIZE)) fail(at + ": the zip entry has no size");

    ZipFilePtr f(zip_fopen_index(za, static_cast<zip_uint64_t>(i), 0));
    if (!f) fail(at + ": cannot read: " + zip_strerror(za));
    // Grow as data actually arrives, so a lying size cannot force a large
    // allocation up front.
    std::vector<uint8_t> bytes;
    bytes.reserve(static_cast<size_t>(std::min<zip_uint64_t>(st.size, 64u << 20)));
    for (;;) {
      const zip_int64_t r = zip_fread(f.get(), chunk.data(), chunk.size());
      if (r < 0) fail(at + ": corrupt data: " + zip_error_strerror(zip_file_get_error(f.get())));
      if (r == 0) break;
      bytes.insert(bytes.end(), chunk.data(), chunk.data() + r);
      if (bytes.size() > st.size) break;
    }
    if (bytes.size() != st.size)
      fail(at + ": the zip entry declares " + std::to_string(st.size) + " bytes, its data gives " +
           (bytes.size() > st.size ? "more" : std::to_string(bytes.size())));
    f.reset();
    out.emplace_back(name, parse_npy(bytes.data(), bytes.size(), at));
  }
  return out;
}

// ---- the dataset -------------------------------------------------------------

struct NpzDataset : Dataset {
  std::string kind;  // "npz file x.npz"
  int64_t n = 0;     // samples in this split
  int64_t start = 0;  // the split's first row in the arrays
  std::vector<Field> fs;
  std::vector<size_t> row_bytes;
  std::vector<std::vector<uint8_t>> data;  // each array's whole data

  int64_t size() const override { return n; }
  std::vector<Field> fields() const override { return fs; }
  std::string describe() const override {
    std::string s = kind + ": " + std::to_string(n) + " samples of ";
    for (size_t f = 0; f < fs.size(); ++f)
      s += (f ? ", " : "") + fs[f].name + " " + dtype_name(fs[f].dtype) + shape_str(fs[f].shape);
    return s;
  }
  void read(int64_t i, const ReadContext&, void* const* out) const override {
    if (i < 0 || i >= n) fail(kind + ": sample " + std::to_string(i) + " out of range [0, " + std::to_string(n) + ")");
    for (size_t f = 0; f < fs.size(); ++f)
      if (out[f] && row_bytes[f])
        std::memcpy(out[f], data[f].data() + static_cast<size_t>(start + i) * row_bytes[f], row_bytes[f]);
  }
};


}  // namespace

std::vector<std::pair<std::string, NpyArray>> read_npz_bytes(const uint8_t* data, size_t size,
                                                              const std::string& where) {
  // libzip reads no bytes as an archive without members; numpy, as an error.
  if (size == 0) fail(where + ": empty file, not a .npz (zip) archive");
  zip_error_t err;
  zip_error_init(&err);
  zip_source_t* src = zip_source_buffer_create(data, size, 0, &err);
  if (!src) {
    std::string msg = zip_error_strerror(&err);
    zip_error_fini(&err);
    fail(where + ": cannot read: " + msg);
  }
  ZipPtr za(zip_open_from_source(src, ZIP_RDONLY, &err));
  if (!za) {
    zip_source_free(src);
    std::string msg = zip_error_strerror(&err);
    zip_error_fini(&err);
    fail(where + ": not a readable .npz (zip) file: " + msg);
  }
  zip_error_fini(&err);
  return read_members(za.get(), where);
}

std::vector<std::pair<std::string, NpyArray>> read_npz(const std::string& path) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) fail(path + ": " + std::strerror(errno));
  if (!S_ISREG(st.st_mode)) fail(path + ": not a regular file");
  if (st.st_size == 0) fail(path + ": empty file, not a .npz (zip) archive");
  int code = 0;
  ZipPtr za(zip_open(path.c_str(), ZIP_RDONLY, &code));
  if (!za) fail(path + ": not a readable .npz (zip) file: " + zip_error_text(code));
  return read_members(za.get(), path);
}

namespace {

const char* npy_descr(DType t) {
  switch (t) {
    case DType::F32: return "<f4";
    case DType::F64: return "<f8";
    case DType::I64: return "<i8";
    case DType::I32: return "<i4";
    case DType::U8: return "|u1";
    case DType::Bool: return "|b1";
    case DType::BF16: break;  // numpy has no bfloat16: npz_write refuses it
  }
  return "";
}

// The header of a version 1.0 .npy, padded so the data starts 64-aligned.
std::string npy_header(const NpyArray& a) {
  std::string shape;
  for (int64_t d : a.shape) shape += std::to_string(d) + ", ";
  if (a.shape.size() > 1) shape.resize(shape.size() - 1);  // (3,) keeps its comma, (2, 3) has none
  std::string dict = std::string("{'descr': '") + npy_descr(a.dtype) + "', 'fortran_order': False, 'shape': (" +
                     shape + "), }";
  const size_t unpadded = 10 + dict.size() + 1;
  dict.append((64 - unpadded % 64) % 64, ' ');
  dict += '\n';
  std::string h = "\x93NUMPY";
  h += '\x01';
  h += '\x00';
  h += static_cast<char>(dict.size() & 0xFF);
  h += static_cast<char>(dict.size() >> 8);
  return h + dict;
}

}  // namespace

void write_npz(const std::string& path, const std::vector<std::pair<std::string, NpyArray>>& arrays) {
  for (const auto& [name, a] : arrays)
    if (a.dtype == DType::BF16)
      fail(path + ": array '" + name + "' is bfloat16, which .npy cannot hold (write a safetensors file instead)");
  int code = 0;
  ZipPtr za(zip_open(path.c_str(), ZIP_CREATE | ZIP_TRUNCATE, &code));
  if (!za) fail(path + ": cannot write: " + zip_error_text(code));
  // The members' bytes must live until zip_close, which writes them.
  std::vector<std::string> members;
  members.reserve(arrays.size());
  for (const auto& [name, a] : arrays) {
    members.push_back(npy_header(a));
    members.back().append(reinterpret_cast<const char*>(a.data.data()), a.data.size());
    zip_source_t* src = zip_source_buffer(za.get(), members.back().data(), members.back().size(), 0);
    const zip_int64_t idx = src ? zip_file_add(za.get(), (name + ".npy").c_str(), src, ZIP_FL_ENC_UTF_8) : -1;
    if (idx < 0) {
      if (src) zip_source_free(src);
      fail(path + ": cannot add " + name + ".npy: " + zip_strerror(za.get()));
    }
    zip_set_file_compression(za.get(), static_cast<zip_uint64_t>(idx), ZIP_CM_STORE, 0);
  }
  zip_t* z = za.release();
  if (zip_close(z) != 0) {
    const std::string msg = zip_strerror(z);
    zip_discard(z);
    fail(path + ": cannot write: " + msg);
  }
}

std::unique_ptr<Dataset> open_npz(const std::string& path, Split split) {
  std::vector<std::pair<std::string, NpyArray>> arrays;
  std::string kind;
  if (ends_with(path, ".npy")) {
    const std::string bytes = read_file(path);
    std::string stem = path.substr(0, path.size() - 4);
    const size_t slash = stem.rfind('/');
    if (slash != std::string::npos) stem = stem.substr(slash + 1);
    if (stem.empty()) fail(path + ": the file name gives the field no name");
    arrays.emplace_back(stem, parse_npy(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(), path));
    kind = "npy file " + path;
  } else {
    arrays = read_npz(path);
    kind = "npz file " + path;
  }
  if (arrays.empty()) fail(path + ": no arrays in the archive");
  auto desc = [](const std::pair<std::string, NpyArray>& a) {
    return a.first + " " + dtype_name(a.second.dtype) + shape_str(a.second.shape);
  };
  for (const auto& a : arrays)
    if (a.second.shape.empty())
      fail(path + ": array " + a.first + " is 0-d (a scalar); every array needs a first dimension, "
           "the sample index");
  const int64_t total = arrays[0].second.shape[0];
  for (const auto& a : arrays)
    if (a.second.shape[0] != total)
      fail(path + ": the arrays disagree on the sample count (dim 0): " + desc(arrays[0]) + " but " +
           desc(a));
  const int64_t cut = total - total / 10;
  auto ds = std::make_unique<NpzDataset>();
  ds->kind = kind;
  ds->start = split == Split::Test ? cut : 0;
  ds->n = split == Split::Train ? cut : split == Split::Test ? total - cut : total;
  if (ds->n == 0) {
    if (split == Split::All) fail(path + ": no samples: the arrays' first dimension is 0");
    fail(path + ": the " + (split == Split::Train ? "train" : "test") +
         " split has no samples: the file has " + std::to_string(total) +
         (total == 1 ? " sample" : " samples") + ", and the test split is the last tenth, rounded down");
  }
  for (auto& [name, a] : arrays) {
    Field f;
    f.name = name;
    f.dtype = a.dtype;
    f.shape.assign(a.shape.begin() + 1, a.shape.end());
    ds->row_bytes.push_back(static_cast<size_t>(total ? a.data.size() / static_cast<size_t>(total) : 0));
    ds->fs.push_back(std::move(f));
    ds->data.push_back(std::move(a.data));
  }
  return ds;
}


}  // namespace ts
