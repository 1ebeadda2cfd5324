//===- ReadFile.cpp - read only regular files, of a sane size -------------===//
#include "ir/ReadFile.h"

#include "llvm/Support/FileSystem.h"

namespace fg {

namespace {

llvm::StringRef kindName(llvm::sys::fs::file_type t) {
  using llvm::sys::fs::file_type;
  switch (t) {
  case file_type::directory_file:
    return "a folder";
  case file_type::character_file:
    return "a character device";
  case file_type::block_file:
    return "a block device";
  case file_type::fifo_file:
    return "a FIFO";
  case file_type::socket_file:
    return "a socket";
  default:
    return "not a plain file";
  }
}

/// Opens `path` and checks that it is a regular file; the fd and its size.
llvm::Error openRegular(llvm::StringRef path, llvm::sys::fs::file_t &fd, uint64_t &size) {
  llvm::Expected<llvm::sys::fs::file_t> f = llvm::sys::fs::openNativeFileForRead(path);
  if (!f)
    return f.takeError();
  llvm::sys::fs::file_status st;
  if (std::error_code ec = llvm::sys::fs::status(*f, st)) {
    llvm::sys::fs::closeFile(*f);
    return llvm::createStringError(ec, "cannot stat: " + ec.message());
  }
  if (st.type() != llvm::sys::fs::file_type::regular_file) {
    llvm::sys::fs::closeFile(*f);
    return llvm::createStringError(std::make_error_code(std::errc::invalid_argument),
                                   "not a regular file (" + kindName(st.type()) + ")");
  }
  fd = *f;
  size = st.getSize();
  return llvm::Error::success();
}

} // namespace

llvm::Expected<std::unique_ptr<llvm::MemoryBuffer>> readRegularFile(llvm::StringRef path,
                                                                    const ReadFileOptions &opts) {
  llvm::sys::fs::file_t fd;
  uint64_t size = 0;
  if (llvm::Error e = openRegular(path, fd, size))
    return e;
  if (size > opts.maxBytes) {
    llvm::sys::fs::closeFile(fd);
    return llvm::createStringError(std::make_error_code(std::errc::file_too_large),
                                   "the file is " + llvm::Twine(size) + " bytes; at most " +
                                       llvm::Twine(opts.maxBytes) + " are read as " + opts.what);
  }
  auto buf = llvm::MemoryBuffer::getOpenFile(fd, path, size, opts.requiresNullTerminator);
  llvm::sys::fs::closeFile(fd);
  if (!buf)
    return llvm::errorCodeToError(buf.getError());
  if ((*buf)->getBufferSize() != size)
    return llvm::createStringError(std::make_error_code(std::errc::io_error),
                                   "short read (the file changed while it was read)");
  return std::move(*buf);
}

llvm::Expected<uint64_t> regularFileSize(llvm::StringRef path) {
  llvm::sys::fs::file_t fd;
  uint64_t size = 0;
  if (llvm::Error e = openRegular(path, fd, size))
    return e;
  llvm::sys::fs::closeFile(fd);
  return size;
}

} // namespace fg
