#include "data/csv_stream.h"

#include <fcntl.h>
#include <glob.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <optional>
#include <utility>

#include "util/strings.h"

namespace tower::data {

namespace {

constexpr int64_t kHeaderReadBytes = 4096;  // reads while looking for a header's end
constexpr int64_t kMaxHeaderBytes = 1 << 20;
constexpr int64_t kSampleBytes = 4096;  // per fingerprint sample

bool IsGlob(const std::string& item) { return item.find_first_of("*?[") != std::string::npos; }

Status StatFile(const std::string& path, int64_t* size) {
  struct stat info;
  if (::stat(path.c_str(), &info) != 0) {
    if (errno == ENOENT || errno == ENOTDIR) return NotFoundError(path + ": no such file");
    return InvalidArgumentError(path + ": cannot open: " + std::strerror(errno));
  }
  if (S_ISDIR(info.st_mode)) return InvalidArgumentError(path + ": is a directory, not a CSV file");
  *size = static_cast<int64_t>(info.st_size);
  return OkStatus();
}

// An open file read at offsets (pread), every byte counted in the set.
class File {
 public:
  File() = default;
  File(const File&) = delete;
  File& operator=(const File&) = delete;
  ~File() { Close(); }

  Status Open(const std::string& path) {
    Close();
    fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd_ < 0) return InvalidArgumentError(path + ": cannot open: " + std::strerror(errno));
    path_ = path;
    return OkStatus();
  }
  void Close() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }

  // Up to `size` bytes at `offset`; fewer only at the end of the file.
  StatusOr<int64_t> Read(int64_t offset, char* out, int64_t size, const CsvFileSet& set) {
    int64_t done = 0;
    while (done < size) {
      const ssize_t got = ::pread(fd_, out + done, static_cast<size_t>(size - done),
                                  static_cast<off_t>(offset + done));
      if (got < 0 && errno == EINTR) continue;
      if (got < 0) return InvalidArgumentError(path_ + ": cannot read: " + std::strerror(errno));
      if (got == 0) break;
      done += got;
    }
    set.CountRead(done);
    return done;
  }

 private:
  int fd_ = -1;
  std::string path_;
};

// The line of `file` (of `set`) that starts at byte `offset`, without its line end, read in
// blocks until its end or the file's; false once it is longer than `limit` bytes.
StatusOr<bool> ReadLineAt(File& file, int64_t offset, const CsvFileSet& set, int64_t limit,
                          std::string* line) {
  line->clear();
  for (int64_t at = offset;; at += kHeaderReadBytes) {
    std::string block(static_cast<size_t>(kHeaderReadBytes), '\0');
    TOWER_ASSIGN_OR_RETURN(const int64_t got, file.Read(at, block.data(), kHeaderReadBytes, set));
    block.resize(static_cast<size_t>(got));
    const size_t end = block.find('\n');
    *line += block.substr(0, end);
    if (end != std::string::npos || got < kHeaderReadBytes) break;
    if (static_cast<int64_t>(line->size()) > limit) return false;
  }
  if (!line->empty() && line->back() == '\r') line->pop_back();
  return true;
}

// Line 1 of `file` (at `path`, of `set`): without its line end and a UTF-8 byte order mark.
StatusOr<std::string> ReadHeaderLine(File& file, const std::string& path, const CsvFileSet& set) {
  std::string header;
  TOWER_ASSIGN_OR_RETURN(const bool whole, ReadLineAt(file, 0, set, kMaxHeaderBytes, &header));
  if (!whole) return InvalidArgumentError(path + ": line 1 (the header) is longer than 1 MiB");
  if (header.size() >= 3 && header.compare(0, 3, "\xEF\xBB\xBF") == 0) header.erase(0, 3);
  return header;
}

std::string ColumnsText(const Schema& schema) {
  return "(" + Join(schema.feature_names, ",") + " -> " + Join(schema.target_names, ",") + ")";
}

}  // namespace

StatusOr<std::vector<std::string>> ExpandDataFiles(const std::string& spec) {
  std::vector<std::string> files;
  for (const std::string& item : Split(spec, ',')) {
    if (item.empty()) return InvalidArgumentError("--data='" + spec + "': an empty file name");
    if (!IsGlob(item)) {
      files.push_back(item);
      continue;
    }
    glob_t matches;
    const int result = ::glob(item.c_str(), 0, nullptr, &matches);
    if (result == GLOB_NOMATCH) {
      ::globfree(&matches);
      return NotFoundError(item + ": no file matches");
    }
    if (result != 0) {
      ::globfree(&matches);
      return InvalidArgumentError(item + ": cannot list the files it matches");
    }
    for (size_t i = 0; i < matches.gl_pathc; ++i) files.push_back(matches.gl_pathv[i]);
    ::globfree(&matches);  // glob sorts its matches
  }
  return files;
}

std::vector<std::vector<SharePiece>> PlanShares(const std::vector<int64_t>& file_sizes,
                                                int64_t shares) {
  std::vector<std::vector<SharePiece>> plan(static_cast<size_t>(shares));
  const int64_t files = static_cast<int64_t>(file_sizes.size());
  if (files >= shares) {
    for (int64_t f = 0; f < files; ++f) {
      plan[static_cast<size_t>(f % shares)].push_back({f, 0, file_sizes[static_cast<size_t>(f)]});
    }
    return plan;
  }
  int64_t total = 0;
  for (int64_t size : file_sizes) total += size;
  for (int64_t s = 0; s < shares; ++s) {
    // Share s: bytes [begin, end) of the files' concatenation.
    const int64_t begin = static_cast<int64_t>(static_cast<__int128>(total) * s / shares);
    const int64_t end = static_cast<int64_t>(static_cast<__int128>(total) * (s + 1) / shares);
    int64_t file_start = 0;
    for (int64_t f = 0; f < files; ++f) {
      const int64_t size = file_sizes[static_cast<size_t>(f)];
      const int64_t lo = std::max(begin, file_start);
      const int64_t hi = std::min(end, file_start + size);
      if (lo < hi) plan[static_cast<size_t>(s)].push_back({f, lo - file_start, hi - file_start});
      file_start += size;
    }
  }
  return plan;
}

// ---- The reader of one share's pieces.

namespace {

class ShareIterator final : public CsvShareIterator {
 public:
  ShareIterator(std::shared_ptr<const CsvFileSet> files, std::vector<SharePiece> pieces,
                int64_t rows_per_element)
      : files_(std::move(files)),
        pieces_(std::move(pieces)),
        rows_per_element_(std::max<int64_t>(rows_per_element, 1)),
        chunk_(std::max<int64_t>(files_->options().chunk_bytes, 1)) {}

  StatusOr<std::optional<Batch>> Next() override {
    return Produce(rows_per_element_, /*parse=*/true);
  }

  StatusOr<std::optional<Batch>> NextUnparsed(int64_t max_rows) override {
    return Produce(std::max<int64_t>(max_rows, 1), /*parse=*/false);
  }

 private:
  StatusOr<std::optional<Batch>> Produce(int64_t max_rows, bool parse) {
    if (!status_.ok()) return status_;
    Batch batch;
    batch.feature_dim = static_cast<int64_t>(files_->schema().feature_names.size());
    batch.target_dim = static_cast<int64_t>(files_->schema().target_names.size());
    if (parse) {
      batch.features.reserve(static_cast<size_t>(max_rows * batch.feature_dim));
      batch.targets.reserve(static_cast<size_t>(max_rows * batch.target_dim));
    }
    while (batch.rows < max_rows) {
      StatusOr<bool> got = NextRow(&batch, parse);
      if (!got.ok()) {
        status_ = got.status();
        return status_;
      }
      if (!*got) break;
    }
    if (batch.rows == 0) return std::optional<Batch>();
    return std::optional<Batch>(std::move(batch));
  }

  // Appends the next row of the share to *batch (only where it is, unless `parse`); false at
  // the end of the share.
  StatusOr<bool> NextRow(Batch* batch, bool parse) {
    while (true) {
      if (!parser_.has_value()) {
        if (piece_ == pieces_.size()) return false;
        TOWER_RETURN_IF_ERROR(OpenPiece(pieces_[piece_]));
      }
      std::string_view line;
      int64_t byte = 0;
      TOWER_ASSIGN_OR_RETURN(const bool have, NextLine(/*bounded=*/true, &line, &byte));
      if (!have) {
        TOWER_RETURN_IF_ERROR(ClosePiece());
        continue;
      }
      if (line_number_ > 0) ++line_number_;
      if (IsBlankCsvLine(line)) {
        if (blank_byte_ < 0) {
          blank_byte_ = byte;
          blank_line_ = line_number_;
        }
        continue;
      }
      if (blank_byte_ >= 0) {
        return parser_->Error(CsvLineParser::Where(blank_line_, blank_byte_) +
                              " is empty (blank lines are allowed only at the end of the file)");
      }
      return ParseRow(line, byte, parse, batch);
    }
  }

  StatusOr<bool> ParseRow(std::string_view line, int64_t byte, bool parse, Batch* batch) {
    if (parse) {
      const int64_t f = batch->feature_dim;
      const int64_t t = batch->target_dim;
      batch->features.resize(static_cast<size_t>((batch->rows + 1) * f));
      batch->targets.resize(static_cast<size_t>((batch->rows + 1) * t));
      TOWER_RETURN_IF_ERROR(parser_->ParseLine(line, line_number_, byte,
                                               batch->features.data() + batch->rows * f,
                                               batch->targets.data() + batch->rows * t));
    }
    batch->source_rows.push_back(StreamRowId(pieces_[piece_].file, byte));
    ++batch->rows;
    ++rows_in_piece_;
    return true;
  }

  Status OpenPiece(const SharePiece& piece) {
    const std::string& path = files_->options().files[static_cast<size_t>(piece.file)];
    TOWER_RETURN_IF_ERROR(file_.Open(path));
    ResetBuffer(0);
    piece_end_ = std::numeric_limits<int64_t>::max();
    header_mode_ = true;
    std::string_view header;
    int64_t byte = 0;
    TOWER_ASSIGN_OR_RETURN(const bool have, NextLine(/*bounded=*/false, &header, &byte));
    if (head_ > static_cast<size_t>(kMaxHeaderBytes)) {
      return InvalidArgumentError(path + ": line 1 (the header) is longer than 1 MiB");
    }
    header_mode_ = false;
    if (have && header.size() >= 3 && header.substr(0, 3) == "\xEF\xBB\xBF") {
      header.remove_prefix(3);
    }
    if (!have || IsBlankCsvLine(header)) {
      TOWER_RETURN_IF_ERROR(CsvLineParser::CheckOptions(path, files_->options().csv));
      return InvalidArgumentError(path + (have ? ": line 1 is empty" : ": the file is empty") +
                                  "; the first line must be a header of column names");
    }
    TOWER_ASSIGN_OR_RETURN(CsvLineParser parser,
                           CsvLineParser::Create(header, path, files_->options().csv));
    const Schema& want = files_->schema();
    if (parser.schema().feature_names != want.feature_names ||
        parser.schema().target_names != want.target_names) {
      return InvalidArgumentError(path + ": columns " + ColumnsText(parser.schema()) +
                                  " differ from " + files_->options().files[0] + "'s " +
                                  ColumnsText(want) + ": every file needs the same columns");
    }
    parser_.emplace(std::move(parser));
    const int64_t data_start = buffer_offset_ + static_cast<int64_t>(head_);
    whole_file_ =
        piece.begin <= data_start && piece.end == files_->sizes()[static_cast<size_t>(piece.file)];
    rows_in_piece_ = 0;
    blank_byte_ = -1;
    piece_end_ = piece.end;
    if (piece.begin <= data_start) {
      line_number_ = 1;  // the header's; the next line is line 2
      return OkStatus();
    }
    // Mid-file: the rows whose lines start at or after `begin` are this share's. The line that
    // holds byte begin - 1 ends at or after it: skip it (it belongs to the previous range).
    line_number_ = 0;  // unknown: messages give byte offsets
    ResetBuffer(piece.begin - 1);
    std::string_view skipped;
    return NextLine(/*bounded=*/false, &skipped, &byte).status();
  }

  Status ClosePiece() {
    if (whole_file_ && rows_in_piece_ == 0) {
      return parser_->Error("the file has a header (line 1) but no data rows");
    }
    parser_.reset();
    file_.Close();
    ++piece_;
    return OkStatus();
  }

  void ResetBuffer(int64_t offset) {
    buffer_offset_ = offset;
    head_ = tail_ = 0;
    eof_ = false;
  }

  // The next line (without its line end) and its byte offset; false at the end of the file,
  // or, `bounded`, when the next line starts at or after the piece's end.
  StatusOr<bool> NextLine(bool bounded, std::string_view* line, int64_t* start) {
    *start = buffer_offset_ + static_cast<int64_t>(head_);
    if (bounded && *start >= piece_end_) return false;
    size_t scanned = head_;
    while (true) {
      const char* data = buffer_.data();
      // (memchr must not see the empty buffer's null data(), even for 0 bytes.)
      const void* end =
          tail_ > scanned ? std::memchr(data + scanned, '\n', tail_ - scanned) : nullptr;
      if (end != nullptr) {
        const size_t length = static_cast<size_t>(static_cast<const char*>(end) - data) - head_;
        *line = std::string_view(data + head_, length);
        head_ += length + 1;
        break;
      }
      if (eof_) {
        if (tail_ == head_) return false;
        *line = std::string_view(data + head_, tail_ - head_);
        head_ = tail_;
        break;
      }
      scanned = tail_ - head_;  // relative: Fill moves the unread bytes to the front
      TOWER_RETURN_IF_ERROR(Fill());
      scanned += head_;
    }
    if (!line->empty() && line->back() == '\r') line->remove_suffix(1);
    return true;
  }

  // Reads more of the file after the unread bytes (moved to the buffer's front first).
  Status Fill() {
    if (head_ > 0) {
      std::memmove(buffer_.data(), buffer_.data() + head_, tail_ - head_);
      buffer_offset_ += static_cast<int64_t>(head_);
      tail_ -= head_;
      head_ = 0;
    }
    const int64_t position = buffer_offset_ + static_cast<int64_t>(tail_);
    // Within the piece, whole chunks; past its end (finishing the last line) or in a header,
    // small reads, so that a share reads little beyond its range.
    int64_t size = header_mode_
                       ? kHeaderReadBytes
                       : std::min(chunk_, std::max(piece_end_ - position, kHeaderReadBytes));
    if (header_mode_ && static_cast<int64_t>(tail_) > kMaxHeaderBytes) {
      eof_ = true;
      return OkStatus();
    }
    if (buffer_.size() < tail_ + static_cast<size_t>(size)) buffer_.resize(tail_ + size);
    TOWER_ASSIGN_OR_RETURN(const int64_t got,
                           file_.Read(position, buffer_.data() + tail_, size, *files_));
    tail_ += static_cast<size_t>(got);
    if (got < size) eof_ = true;
    return OkStatus();
  }

  std::shared_ptr<const CsvFileSet> files_;
  std::vector<SharePiece> pieces_;
  const int64_t rows_per_element_;
  const int64_t chunk_;
  Status status_;

  size_t piece_ = 0;
  std::optional<CsvLineParser> parser_;  // set while a piece is open
  File file_;
  bool whole_file_ = false;
  bool header_mode_ = false;
  int64_t piece_end_ = 0;
  int64_t rows_in_piece_ = 0;
  int64_t line_number_ = 0;  // of the last line read; 0: not known (a range mid-file)
  int64_t blank_byte_ = -1;  // the first blank line since the last row, if any
  int64_t blank_line_ = 0;

  std::vector<char> buffer_;
  int64_t buffer_offset_ = 0;  // the file offset of buffer_[0]
  size_t head_ = 0;            // unread bytes: buffer_[head_, tail_)
  size_t tail_ = 0;
  bool eof_ = false;
};

}  // namespace

// ---- The set of files.

StatusOr<std::shared_ptr<const CsvFileSet>> CsvFileSet::Open(CsvStreamOptions options) {
  if (options.files.empty()) return InvalidArgumentError("a CSV stream needs at least one file");
  if (options.chunk_bytes < 1) {
    return InvalidArgumentError("CsvStreamOptions::chunk_bytes must be at least 1");
  }
  std::shared_ptr<CsvFileSet> set(new CsvFileSet());
  for (const std::string& path : options.files) {
    int64_t size = 0;
    TOWER_RETURN_IF_ERROR(StatFile(path, &size));
    set->sizes_.push_back(size);
  }
  set->options_ = std::move(options);
  // The schema: the first file's header, as its reader parses it.
  File file;
  const std::string& first = set->options_.files[0];
  TOWER_RETURN_IF_ERROR(file.Open(first));
  TOWER_ASSIGN_OR_RETURN(const std::string header, ReadHeaderLine(file, first, *set));
  if (IsBlankCsvLine(header)) {
    TOWER_RETURN_IF_ERROR(CsvLineParser::CheckOptions(first, set->options_.csv));
    return InvalidArgumentError(
        first + (set->sizes_[0] == 0 ? ": the file is empty" : ": line 1 is empty") +
        "; the first line must be a header of column names");
  }
  TOWER_ASSIGN_OR_RETURN(CsvLineParser parser,
                         CsvLineParser::Create(header, first, set->options_.csv));
  set->schema_ = parser.schema();
  return std::shared_ptr<const CsvFileSet>(std::move(set));
}

int64_t CsvFileSet::total_bytes() const {
  int64_t total = 0;
  for (int64_t size : sizes_) total += size;
  return total;
}

StatusOr<std::string> CsvFileSet::Fingerprint() const {
  uint64_t hash = 0xcbf29ce484222325ull;  // FNV-1a 64
  auto mix = [&hash](const char* bytes, size_t size) {
    for (size_t i = 0; i < size; ++i) {
      hash = (hash ^ static_cast<unsigned char>(bytes[i])) * 0x100000001b3ull;
    }
  };
  std::string text = std::to_string(options_.files.size()) + " file" +
                     (options_.files.size() == 1 ? "" : "s") + " (";
  std::vector<char> sample(static_cast<size_t>(kSampleBytes));
  for (size_t f = 0; f < options_.files.size(); ++f) {
    const int64_t size = sizes_[f];
    text += (f == 0 ? "" : ", ") + options_.files[f] + " " + std::to_string(size) + " bytes";
    File file;
    TOWER_RETURN_IF_ERROR(file.Open(options_.files[f]));
    for (const int64_t at : {int64_t{0}, size / 2, std::max<int64_t>(0, size - kSampleBytes)}) {
      TOWER_ASSIGN_OR_RETURN(const int64_t got, file.Read(at, sample.data(), kSampleBytes, *this));
      mix(sample.data(), static_cast<size_t>(got));
    }
  }
  char hex[17];
  std::snprintf(hex, sizeof(hex), "%016llx", static_cast<unsigned long long>(hash));
  return text + "), columns " + ColumnsText(schema_) + ", sampled fnv1a64 " + hex;
}

std::string CsvFileSet::DescribeRow(int64_t source_row) const {
  const int64_t file = source_row >> 40;
  if (source_row < 0 || file >= static_cast<int64_t>(options_.files.size())) {
    return "row " + std::to_string(source_row);
  }
  return options_.files[static_cast<size_t>(file)] + ": the line at byte " +
         std::to_string(source_row & ((int64_t{1} << 40) - 1));
}

// ---- One share's rows.

CsvShareStream::CsvShareStream(std::shared_ptr<const CsvFileSet> files, int64_t share,
                               int64_t shares, int64_t rows_per_element)
    : files_(std::move(files)),
      share_(share),
      shares_(shares),
      rows_per_element_(rows_per_element) {}

StatusOr<std::unique_ptr<Iterator>> CsvShareStream::Open(uint64_t) const {
  TOWER_ASSIGN_OR_RETURN(std::unique_ptr<CsvShareIterator> share, OpenShare());
  return std::unique_ptr<Iterator>(std::move(share));
}

StatusOr<std::unique_ptr<CsvShareIterator>> CsvShareStream::OpenShare() const {
  if (shares_ < 1 || share_ < 0 || share_ >= shares_) {
    return InvalidArgumentError("CsvShareStream: share " + std::to_string(share_) + " of " +
                                std::to_string(shares_));
  }
  std::vector<std::vector<SharePiece>> plan = PlanShares(files_->sizes(), shares_);
  return std::unique_ptr<CsvShareIterator>(std::make_unique<ShareIterator>(
      files_, std::move(plan[static_cast<size_t>(share_)]), rows_per_element_));
}

// ---- Rows by where they are.

struct CsvRowReader::OpenFile {
  File file;
  std::optional<CsvLineParser> parser;
};

CsvRowReader::CsvRowReader(std::shared_ptr<const CsvFileSet> files)
    : files_(std::move(files)), open_(files_->options().files.size()) {}

CsvRowReader::~CsvRowReader() = default;

Status CsvRowReader::Read(int64_t source_row, float* features, float* targets) {
  const int64_t index = source_row >> 40;
  const int64_t byte = source_row & ((int64_t{1} << 40) - 1);
  if (source_row < 0 || index >= static_cast<int64_t>(open_.size())) {
    return InvalidArgumentError("CsvRowReader: " + std::to_string(source_row) +
                                " is not a row of " + Join(files_->options().files, ", "));
  }
  const std::string& path = files_->options().files[static_cast<size_t>(index)];
  std::unique_ptr<OpenFile>& open = open_[static_cast<size_t>(index)];
  if (open == nullptr) {
    auto opened = std::make_unique<OpenFile>();
    TOWER_RETURN_IF_ERROR(opened->file.Open(path));
    TOWER_ASSIGN_OR_RETURN(const std::string header, ReadHeaderLine(opened->file, path, *files_));
    TOWER_ASSIGN_OR_RETURN(CsvLineParser parser,
                           CsvLineParser::Create(header, path, files_->options().csv));
    opened->parser.emplace(std::move(parser));
    open = std::move(opened);
  }
  std::string line;
  TOWER_RETURN_IF_ERROR(
      ReadLineAt(open->file, byte, *files_, std::numeric_limits<int64_t>::max(), &line).status());
  if (IsBlankCsvLine(line)) {
    return open->parser->Error(CsvLineParser::Where(0, byte) +
                               " is empty: the file changed since the run read it");
  }
  return open->parser->ParseLine(line, 0, byte, features, targets);
}

std::string CsvShareStream::DescribeRow(int64_t source_row) const {
  return files_->DescribeRow(source_row);
}

std::string CsvShareStream::DebugString() const {
  return "CsvStream(" + Join(files_->options().files, ", ") + "; share " + std::to_string(share_) +
         " of " + std::to_string(shares_) + ")";
}

}  // namespace tower::data
