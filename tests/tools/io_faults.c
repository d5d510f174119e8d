/* A preload library for tests/mpi/checkpoint_faults_test.sh: writes that fail on one rank only,
 * as a failing disk or a quota met by another process would make them, or a rank killed in the
 * middle of a write, without a hook in Trident's code. Loaded with LD_PRELOAD into every rank:
 *
 *   TRIDENT_TEST_FAULT_RANK=R                the MPI world rank (OMPI_COMM_WORLD_RANK) that fails
 *   TRIDENT_TEST_FAIL_WRITES_AFTER_BYTES=N   its writes to files named "*.h5.tmp" (a parameter
 *                                            file being written) succeed until N bytes, then fail
 *                                            with EIO
 *   TRIDENT_TEST_KILL_AFTER_BYTES=N          or: succeed until N bytes, then the rank is killed
 *                                            by SIGKILL instead of the write that would pass N,
 *                                            as `kill -9` or the kernel's out-of-memory killer
 *                                            would end it; exact to the byte, so not a race
 *                                            against a fast write
 *
 * Every other file, and every other rank, is untouched. Open MPI's MPI-IO (OMPIO) opens with
 * open() and writes with pwritev() or pwrite(); the other calls are covered in case it changes. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <unistd.h>

enum { kMaxFd = 4096 };
static char watched[kMaxFd]; /* fd -> 1 when it was opened on a "*.h5.tmp" file */
static long long written;    /* bytes this rank wrote to watched files */

static int failing_rank(void) {
  const char* rank = getenv("OMPI_COMM_WORLD_RANK");
  const char* target = getenv("TRIDENT_TEST_FAULT_RANK");
  return rank != NULL && target != NULL && strcmp(rank, target) == 0;
}

static void watch(int fd, const char* path) {
  if (fd < 0 || fd >= kMaxFd) return;
  const size_t length = strlen(path);
  watched[fd] = length > 7 && strcmp(path + length - 7, ".h5.tmp") == 0;
}

/* Whether a write of `bytes` to `fd` fails (with errno = EIO; or the rank is killed first); counts
 * the ones that do not. */
static int fails(int fd, size_t bytes) {
  const char* after = getenv("TRIDENT_TEST_FAIL_WRITES_AFTER_BYTES");
  const char* kill_after = getenv("TRIDENT_TEST_KILL_AFTER_BYTES");
  if ((after == NULL && kill_after == NULL) || fd < 0 || fd >= kMaxFd || !watched[fd] || !failing_rank()) return 0;
  if (kill_after != NULL && written + (long long)bytes > atoll(kill_after)) raise(SIGKILL);
  if (after != NULL && written + (long long)bytes > atoll(after)) {
    errno = EIO;
    return 1;
  }
  written += (long long)bytes;
  return 0;
}

static size_t total(const struct iovec* pieces, int count) {
  size_t bytes = 0;
  for (int i = 0; i < count; ++i) bytes += pieces[i].iov_len;
  return bytes;
}

#define REAL(name, type) static type real_##name; if (!real_##name) real_##name = (type)dlsym(RTLD_NEXT, #name)

typedef int (*open_fn)(const char*, int, ...);

/* `real` (open or open64) with the mode that follows the flags when they create a file. */
static int watched_open(open_fn real, const char* path, int flags, va_list args) {
  const int mode = (flags & O_CREAT) || (flags & O_TMPFILE) == O_TMPFILE ? va_arg(args, int) : 0;
  const int fd = real(path, flags, mode);
  watch(fd, path);
  return fd;
}

int open(const char* path, int flags, ...) {
  REAL(open, open_fn);
  va_list args;
  va_start(args, flags);
  const int fd = watched_open(real_open, path, flags, args);
  va_end(args);
  return fd;
}

int open64(const char* path, int flags, ...) {
  REAL(open64, open_fn);
  va_list args;
  va_start(args, flags);
  const int fd = watched_open(real_open64, path, flags, args);
  va_end(args);
  return fd;
}

typedef ssize_t (*write_fn)(int, const void*, size_t);
typedef ssize_t (*pwrite_fn)(int, const void*, size_t, off_t);
typedef ssize_t (*writev_fn)(int, const struct iovec*, int);
typedef ssize_t (*pwritev_fn)(int, const struct iovec*, int, off_t);

ssize_t write(int fd, const void* buffer, size_t bytes) {
  REAL(write, write_fn);
  return fails(fd, bytes) ? -1 : real_write(fd, buffer, bytes);
}

ssize_t pwrite(int fd, const void* buffer, size_t bytes, off_t offset) {
  REAL(pwrite, pwrite_fn);
  return fails(fd, bytes) ? -1 : real_pwrite(fd, buffer, bytes, offset);
}

ssize_t pwrite64(int fd, const void* buffer, size_t bytes, off_t offset) {
  REAL(pwrite64, pwrite_fn);
  return fails(fd, bytes) ? -1 : real_pwrite64(fd, buffer, bytes, offset);
}

ssize_t writev(int fd, const struct iovec* pieces, int count) {
  REAL(writev, writev_fn);
  return fails(fd, total(pieces, count)) ? -1 : real_writev(fd, pieces, count);
}

ssize_t pwritev(int fd, const struct iovec* pieces, int count, off_t offset) {
  REAL(pwritev, pwritev_fn);
  return fails(fd, total(pieces, count)) ? -1 : real_pwritev(fd, pieces, count, offset);
}
