/*
 * Whole reads and writes on a file descriptor: a signal (EINTR) or a short count does not end
 * them, only the end of the file or an error does.
 */
#ifndef SYNCTOP_IO_H
#define SYNCTOP_IO_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* Reads n bytes into buf, from the file position (off < 0) or at offset off (pread). Returns the
 * count read, short only at the end of the file, or -1 with errno set. */
ssize_t cm_read_full(int fd, void *buf, size_t n, int64_t off);

/* One read of up to n bytes, from the file position, retried when a signal interrupts it: what a
 * pipe has for now. Returns the count read (0 at the end of the file), or -1 with errno set. */
ssize_t cm_read_some(int fd, void *buf, size_t n);

/* Writes the n bytes at p. Returns 0, or -1 with errno set. */
int cm_write_full(int fd, const void *p, size_t n);

#endif
