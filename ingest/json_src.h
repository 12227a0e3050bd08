/*
 * The Kineto importer's input: the JSON text of a plain or gzip file, pipe or memory, handed to the
 * scanner a piece at a time, read (and inflated) on a thread of its own for large inputs. It owns the
 * descriptor's reading after the bytes its caller read, the inflaters and the slots the pieces lie in.
 *
 * The reader starts it (jsrc_start), takes each piece (jsrc_next: the text is slot[i] + JSRC_HEAD,
 * len[i] bytes, followed by JSRC_PAD zero bytes), gives its slot back once it no longer reads it
 * (jsrc_release), and closes it (jsrc_close). Besides the slots, it reads gz, total, done[i] (progress)
 * and read_bytes, and the fields it set before starting (name, fd or mem and mem_len, head, head_len,
 * plain_here).
 */
#ifndef SYNCTOP_JSON_SRC_H
#define SYNCTOP_JSON_SRC_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <zlib.h>

#include "synctop/error.h"

#define JSRC_CHUNK (256u << 10) /* bytes of JSON text per piece of input */
#define JSRC_HEAD  (4u << 10)   /* room before a piece for the unfinished token of the last */
#define JSRC_PAD   64           /* bytes after a piece: the scanner's 0 sentinel, whole loads */
#define JSRC_NSLOT 8            /* pieces in flight between the producer's thread and the scanner */

/* zlib's reading of the input: memory in pieces of up to 1 GiB, a file in reads of JSRC_CHUNK after the
 * bytes read before (the caller's and those that told the format). */
typedef struct jsrc_zin {
    uint8_t *in; /* file input buffer (JSRC_CHUNK) */
    size_t in_len, in_pos;
    int in_eof;
    size_t mem_pos;
    uint64_t read_bytes; /* input bytes taken from the file or memory */
    int z_init, z_end;   /* z_end: a member ended */
    z_stream zs;
} jsrc_zin;

typedef struct jsrc {
    const char *name;
    int fd; /* -1: memory */
    const uint8_t *mem;
    size_t mem_len;
    uint64_t total;     /* input size for progress, 0 when unknown */
    uint8_t *head;      /* the input's first bytes, read before anything else (file input) */
    size_t head_len;
    int head_eof;       /* the file ended within them */
    int regular;        /* fd is a regular file: it can be read again from fd_at */
    off_t fd_at;        /* the file offset just after head */
    uint64_t fd_size;   /* head_len + what the file holds after fd_at */
    int gz;
    uint64_t plain_here; /* plain text of more bytes than this is read on the reader's thread (which then
                            reads a file or memory itself); 0: never */
    int inline_gz;      /* gzip is inflated on the reader's thread as it asks for each piece */
    int engine;         /* ENG_*: what fills the next slot */
    uint64_t read_bytes; /* input bytes taken, as the importer has always counted them */

    /* plain text */
    size_t pos;         /* memory offset, or bytes of head handed out */
    int eof;

    /* ISA-L */
    struct inflate_state *is;
    const uint8_t *iin; /* its input: memory, or ibuf */
    size_t iin_len, iin_pos;
    uint64_t iin_at;    /* offset of iin[0] in the input */
    uint8_t *ibuf;
    int ieof;           /* no input after iin_len */
    int member;         /* inside a member's deflate data */

    /* zlib */
    jsrc_zin z;

    /* the slots and the queue between producer and scanner */
    uint8_t *slot[JSRC_NSLOT];
    size_t len[JSRC_NSLOT];
    uint64_t done[JSRC_NSLOT]; /* input bytes consumed when the slot was filled (progress) */
    int freel[JSRC_NSLOT], n_free;
    int queue[JSRC_NSLOT], q_head, q_n;
    int pending;          /* ISA-L: filled, handed out once the next one is filled; -1 none */
    uint64_t published;   /* text bytes handed out */
    int finished, status; /* the producer is done: status 0 at the end of the text, or an error */
    err_msg perr;         /* its message */
    int threaded, cancel, joinable; /* joinable: the thread was started (the scanner's to read) */
    int wait_free, wait_ready; /* the producer waits for free slots; the scanner for a piece */
    pthread_t th;
    pthread_mutex_t mu;
    pthread_cond_t cv_ready, cv_free;
} jsrc;

/* Reads the first bytes (a pipe may deliver one byte first), tells plain from gzip, and starts the
 * producer. */
int jsrc_start(jsrc *s, err_msg *err);
/* The next piece of text: 1 with its slot in *slot, 0 at the end, or a negative code. */
int jsrc_next(jsrc *s, int *slot, err_msg *err);
/* Gives slot i back to the producer. */
void jsrc_release(jsrc *s, int i);
/* Ends the producer's thread and frees what the source holds; may be called twice. */
void jsrc_close(jsrc *s);

#endif
