// Hugging Face safetensors reader and writer, free of exceptions.
#include "runtime/io/Safetensors.h"
#include "runtime/io/FileUtil.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <limits>
#include <memory>
#include <set>

namespace sbprt::io {
namespace {
using namespace detail;

// ordered_json keeps the header's key order, which entries() promises.
using Json = nlohmann::ordered_json;


// Same limit as the reference implementation: a bigger header is surely bogus.
constexpr uint64_t kMaxHeaderLen = 100000000;

/// Element size of every dtype the format defines, so sizes can be validated
/// even for entries we cannot read; 0 for names we do not know.
size_t storedDtypeSize(const std::string &name) {
  static const std::map<std::string, size_t> sizes = {
      {"BOOL", 1}, {"U8", 1},  {"I8", 1},  {"F8_E5M2", 1}, {"F8_E4M3", 1},
      {"I16", 2},  {"U16", 2}, {"F16", 2}, {"BF16", 2},    {"I32", 4},
      {"U32", 4},  {"F32", 4}, {"I64", 8}, {"U64", 8},     {"F64", 8}};
  auto it = sizes.find(name);
  return it == sizes.end() ? 0 : it->second;
}

/// Validates one tensor entry of the header; returns what is wrong, or "".
std::string parseEntry(const std::string &name, const Json &value,
                       uint64_t dataSize, SafetensorsEntry &entry) {
  std::string where = "entry '" + name + "'";
  if (!value.is_object())
    return where + " is not an object";
  auto dtype = value.find("dtype");
  if (dtype == value.end() || !dtype->is_string())
    return where + " has no string 'dtype'";
  auto shape = value.find("shape");
  if (shape == value.end() || !shape->is_array())
    return where + " has no array 'shape'";
  auto offsets = value.find("data_offsets");
  if (offsets == value.end() || !offsets->is_array() || offsets->size() != 2 ||
      !(*offsets)[0].is_number_unsigned() ||
      !(*offsets)[1].is_number_unsigned())
    return where + " has no 'data_offsets' pair of unsigned integers";

  entry.name = name;
  entry.dtypeName = dtype->get_ref<const std::string &>();
  entry.dtype = dtypeFromSafetensorsName(entry.dtypeName);
  for (const Json &dim : *shape) {
    if (!dim.is_number_unsigned() ||
        dim.get<uint64_t>() > uint64_t(std::numeric_limits<int64_t>::max()))
      return where + " has a 'shape' that is not a list of unsigned integers";
    entry.shape.push_back(static_cast<int64_t>(dim.get<uint64_t>()));
  }
  entry.begin = (*offsets)[0].get<uint64_t>();
  entry.end = (*offsets)[1].get<uint64_t>();
  if (entry.begin > entry.end || entry.end > dataSize)
    return where + " has data_offsets [" + std::to_string(entry.begin) + ", " +
           std::to_string(entry.end) + "] out of range (data buffer has " +
           std::to_string(dataSize) + " bytes)";
  if (size_t elemSize = storedDtypeSize(entry.dtypeName)) {
    uint64_t bytes = 0;
    if (!checkedByteSize(entry.shape, elemSize, bytes))
      return where + " has shape " + shapeToString(entry.shape) +
             ", which is too large";
    if (bytes != entry.end - entry.begin)
      return where + " has " + std::to_string(entry.end - entry.begin) +
             " bytes of data, but dtype " + entry.dtypeName + " and shape " +
             shapeToString(entry.shape) + " need " + std::to_string(bytes);
  }
  return "";
}

} // namespace

std::optional<SafetensorsFile> SafetensorsFile::open(const std::string &path,
                                                     std::string &error) {
  FilePtr file = openForReading(path, error);
  if (!file)
    return std::nullopt;
  long fileSizeL = -1;
  if (std::fseek(file.get(), 0, SEEK_END) == 0)
    fileSizeL = std::ftell(file.get());
  if (fileSizeL < 0 || std::fseek(file.get(), 0, SEEK_SET) != 0) {
    fail(error, path, "cannot seek");
    return std::nullopt;
  }
  uint64_t fileSize = static_cast<uint64_t>(fileSizeL);
  unsigned char lenBytes[8];
  if (std::fread(lenBytes, 1, 8, file.get()) != 8) {
    fail(error, path,
         "truncated: file is shorter than the 8-byte header length");
    return std::nullopt;
  }
  uint64_t headerLen = 0;
  for (int i = 0; i < 8; ++i)
    headerLen |= static_cast<uint64_t>(lenBytes[i]) << (8 * i);
  if (headerLen > fileSize - 8) {
    fail(error, path,
         "header length " + std::to_string(headerLen) +
             " runs past the end of the file (" + std::to_string(fileSize) +
             " bytes)");
    return std::nullopt;
  }
  if (headerLen > kMaxHeaderLen) {
    fail(error, path,
         "header length " + std::to_string(headerLen) + " is too large");
    return std::nullopt;
  }
  std::string text(static_cast<size_t>(headerLen), '\0');
  if (headerLen &&
      std::fread(&text[0], 1, text.size(), file.get()) != text.size()) {
    fail(error, path, "read failed");
    return std::nullopt;
  }

  // The DOM parser silently keeps one of two equal keys, so catch them here.
  std::set<std::string> seen;
  std::string duplicate;
  Json::parser_callback_t onEvent = [&](int depth, Json::parse_event_t event,
                                        Json &parsed) {
    if (depth == 1 && event == Json::parse_event_t::key && parsed.is_string() &&
        !seen.insert(parsed.get_ref<const std::string &>()).second &&
        duplicate.empty())
      duplicate = parsed.get_ref<const std::string &>();
    return true;
  };
  Json header = Json::parse(text, onEvent, /*allow_exceptions=*/false);
  if (header.is_discarded()) {
    fail(error, path, "header is not valid JSON");
    return std::nullopt;
  }
  if (!header.is_object()) {
    fail(error, path, "header is not a JSON object");
    return std::nullopt;
  }
  if (!duplicate.empty()) {
    fail(error, path, "header has duplicate key '" + duplicate + "'");
    return std::nullopt;
  }

  SafetensorsFile result;
  result.path_ = path;
  result.dataStart_ = 8 + headerLen;
  uint64_t dataSize = fileSize - result.dataStart_;
  for (auto it = header.begin(); it != header.end(); ++it) {
    const std::string &name = it.key();
    if (name == "__metadata__") {
      bool ok = it->is_object();
      for (auto m = it->begin(); ok && m != it->end(); ++m) {
        ok = m->is_string();
        if (ok)
          result.metadata_[m.key()] = m->get_ref<const std::string &>();
      }
      if (!ok) {
        fail(error, path, "__metadata__ is not a map of strings to strings");
        return std::nullopt;
      }
      continue;
    }
    SafetensorsEntry entry;
    std::string problem = parseEntry(name, *it, dataSize, entry);
    if (!problem.empty()) {
      fail(error, path, problem);
      return std::nullopt;
    }
    result.index_[name] = result.entries_.size();
    result.entries_.push_back(std::move(entry));
  }
  // The tensors tile the data buffer, as the format requires: one that
  // overlaps another would read its bytes (a shifted offset gave NaNs),
  // and bytes no tensor owns are not what the file says it holds.
  std::vector<const SafetensorsEntry *> byOffset;
  for (const SafetensorsEntry &entry : result.entries_)
    byOffset.push_back(&entry);
  std::sort(byOffset.begin(), byOffset.end(), [](const auto *a, const auto *b) {
    return std::pair(a->begin, a->end) < std::pair(b->begin, b->end);
  });
  uint64_t covered = 0;
  const SafetensorsEntry *previous = nullptr;
  for (const SafetensorsEntry *entry : byOffset) {
    if (entry->begin < covered) {
      fail(error, path,
           "tensor '" + entry->name + "' has data_offsets [" + std::to_string(entry->begin) + ", " +
               std::to_string(entry->end) + "], which overlap those of '" + previous->name + "' [" +
               std::to_string(previous->begin) + ", " + std::to_string(previous->end) + "]");
      return std::nullopt;
    }
    if (entry->begin > covered) {
      fail(error, path,
           "no tensor holds bytes [" + std::to_string(covered) + ", " +
               std::to_string(entry->begin) + ") of the data buffer (tensors must tile it)");
      return std::nullopt;
    }
    covered = entry->end;
    previous = entry;
  }
  if (covered != dataSize) {
    fail(error, path,
         "no tensor holds bytes [" + std::to_string(covered) + ", " + std::to_string(dataSize) +
             ") of the data buffer (tensors must tile it)");
    return std::nullopt;
  }
  return result;
}

const SafetensorsEntry *SafetensorsFile::find(const std::string &name) const {
  auto it = index_.find(name);
  return it == index_.end() ? nullptr : &entries_[it->second];
}

bool SafetensorsFile::read(const SafetensorsEntry &entry, Tensor &out,
                           std::string &error) const {
  return readSlice(entry, std::vector<int64_t>(entry.shape.size(), 0),
                   entry.shape, out, error);
}

bool SafetensorsFile::readSlice(const SafetensorsEntry &entry,
                                const std::vector<int64_t> &offsets,
                                const std::vector<int64_t> &sizes, Tensor &out,
                                std::string &error, const std::vector<int64_t> *view) const {
  const std::string where = "tensor '" + entry.name + "'";
  if (!entry.dtype)
    return fail(error, path_,
                where + " has dtype " + entry.dtypeName +
                    ", which is not supported (F32, F64, I32, I64)");
  size_t elemSize = dtypeSize(*entry.dtype);
  uint64_t fullBytes = 0;
  if (!checkedByteSize(entry.shape, elemSize, fullBytes) || entry.begin > entry.end ||
      entry.end - entry.begin != fullBytes)
    return fail(error, path_,
                where + " has data_offsets that do not match its shape");
  const std::vector<int64_t> &shape = view ? *view : entry.shape;
  if (view && numElements(*view) != numElements(entry.shape))
    return fail(error, path_,
                where + " of shape " + shapeToString(entry.shape) + " cannot be viewed as " +
                    shapeToString(*view));
  std::string problem = checkBlock(shape, offsets, sizes);
  if (!problem.empty())
    return fail(error, path_, problem + " (" + where + ")");
  Tensor result(*entry.dtype, sizes);
  if (result.numBytes() == 0) {
    out = std::move(result);
    return true;
  }
  FilePtr file(std::fopen(path_.c_str(), "rb"));
  if (!file)
    return fail(error, path_,
                std::string("cannot open: ") + std::strerror(errno));
  if (!readBlock(file.get(), path_, dataStart_ + entry.begin, shape, elemSize, offsets, sizes,
                 result.data(), error))
    return false;
  out = std::move(result);
  return true;
}

bool writeSafetensors(
    const std::string &path,
    const std::vector<std::pair<std::string, const Tensor *>> &tensors,
    std::string &error, const std::map<std::string, std::string> &metadata) {
  Json header = Json::object();
  if (!metadata.empty()) {
    Json &meta = header["__metadata__"] = Json::object();
    for (const auto &[key, value] : metadata)
      meta[key] = value;
  }
  uint64_t offset = 0;
  for (const auto &[name, tensor] : tensors) {
    if (!tensor)
      return fail(error, path, "tensor '" + name + "' is null");
    if (name == "__metadata__" || header.contains(name))
      return fail(error, path,
                  "duplicate or reserved tensor name '" + name + "'");
    Json entry = Json::object();
    entry["dtype"] = safetensorsName(tensor->dtype());
    entry["shape"] = tensor->shape();
    entry["data_offsets"] = {offset, offset + tensor->numBytes()};
    header[name] = std::move(entry);
    offset += tensor->numBytes();
  }
  // Strict UTF-8 checking would abort without exceptions; bad bytes in names
  // become U+FFFD instead.
  std::string text =
      header.dump(-1, ' ', false, Json::error_handler_t::replace);
  text.resize((text.size() + 7) / 8 * 8, ' ');

  unsigned char lenBytes[8];
  for (int i = 0; i < 8; ++i)
    lenBytes[i] =
        static_cast<unsigned char>((uint64_t(text.size()) >> (8 * i)) & 0xff);
  std::vector<Chunk> chunks = {{lenBytes, 8}, {text.data(), text.size()}};
  for (const auto &entry : tensors)
    chunks.push_back({entry.second->data(), entry.second->numBytes()});
  return writeFile(path, chunks, error);
}

} // namespace sbprt::io
