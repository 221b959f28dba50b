/*
 * paths.h - the names of files in the per-file records (paths.c), as
 * Darshan names them: its record id is a hash of the path the program
 * opened, made absolute and cleaned (darshan_clean_file_path).
 */
#ifndef CEIL_IP_PATHS_H
#define CEIL_IP_PATHS_H

#include <stddef.h>
#include <stdint.h>

/* fd's link in /proc/self/fd, in out (len bytes); "" when there is none. */
void ceil_ip_fd_path(int fd, char *out, size_t len) __attribute__((visibility("hidden")));

/* "//" and "/./" removed, in place (Darshan's darshan_clean_file_path: ".."
 * and links are left as they are). */
void ceil_ip_clean_path(char *p) __attribute__((visibility("hidden")));

/* path made absolute, in out: after the working directory, or dirfd's link
 * (dirfd not AT_FDCWD), when relative; cleaned. 0 when it does not fit or
 * the directory cannot be told. */
int ceil_ip_absolute_path(int dirfd, const char *path, char *out, size_t len) __attribute__((visibility("hidden")));

/* A path's record key: FNV-1a, 64 bits, of the whole path. */
uint64_t ceil_ip_path_key(const char *path) __attribute__((visibility("hidden")));

#endif /* CEIL_IP_PATHS_H */
