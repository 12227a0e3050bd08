/*
 * Small text helpers.
 */
#ifndef SYNCTOP_TEXT_H
#define SYNCTOP_TEXT_H

/* The last component of a path ("dir/file.py" -> "file.py"); the path itself when it ends in '/'
 * or has none. */
const char *cm_base_name(const char *path);

#endif
