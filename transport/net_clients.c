/*
 * The list of clients a publisher or relay admits (net.h, tp_clients): their CURVE public keys,
 * read once at start from a directory of .pub files or from one file of keys, kept sorted so that
 * the ZAP handler (net_zap.c) answers each request with a binary search. The list decides who may
 * watch, so it is refused when every user may write to it, as ssh refuses such an authorized_keys.
 */
#include "io.h"
#include "net_zap.h"
#include "synctop/net.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zmq.h>

#define CLIENTS_FILE_MAX (4u << 20) /* a file of TP_CLIENTS_MAX keys with comments is under 1 MiB */

struct tp_clients {
    uint8_t (*keys)[32]; /* sorted, distinct */
    size_t n, cap;
};

static int key_cmp(const void *a, const void *b) { return memcmp(a, b, 32); }

static int clients_add(tp_clients *c, const char *z85, const char *path, int line_no, err_msg *err) {
    if (c->n == TP_CLIENTS_MAX)
        return err_set(err, ERR_LIMIT, "%s line %d: more than %d client keys", path, line_no, TP_CLIENTS_MAX);
    if (c->n == c->cap) {
        size_t cap = c->cap ? 2 * c->cap : 16;
        void *v = realloc(c->keys, cap * sizeof *c->keys);
        if (v == NULL)
            return err_set(err, ERR_NOMEM, "out of memory");
        c->keys = v;
        c->cap = cap;
    }
    char key[TP_KEY_Z85_LEN + 1];
    memcpy(key, z85, TP_KEY_Z85_LEN);
    key[TP_KEY_Z85_LEN] = '\0';
    if (zmq_z85_decode(c->keys[c->n], key) == NULL)
        return err_set(err, ERR_MALFORMED, "%s line %d: not a valid key", path, line_no);
    c->n++;
    return 0;
}

static int is_blank(char ch) { return ch == ' ' || ch == '\t' || ch == '\r'; }

/* Whether s starts with a key: 40 characters that decode, then the end or a blank. */
static int starts_with_key(const char *s) {
    size_t n = 0;
    while (s[n] != '\0' && !is_blank(s[n]))
        n++;
    if (n != TP_KEY_Z85_LEN)
        return 0;
    char key[TP_KEY_Z85_LEN + 1];
    uint8_t bin[32];
    memcpy(key, s, TP_KEY_Z85_LEN);
    key[TP_KEY_Z85_LEN] = '\0';
    return zmq_z85_decode(bin, key) != NULL;
}

/* Whether s is the field `name` followed by blanks and '='; *value is then what follows, trimmed. */
static int field(const char *s, const char *name, const char **value) {
    size_t n = strlen(name);
    if (strncmp(s, name, n) != 0)
        return 0;
    s += n;
    while (is_blank(*s))
        s++;
    if (*s != '=')
        return 0;
    s++;
    while (is_blank(*s))
        s++;
    *value = s;
    return 1;
}

/* One line, its blanks at both ends already cut. */
static int parse_line(tp_clients *c, const char *s, const char *path, int line_no, err_msg *err) {
    const char *value;
    if (s[0] == '\0')
        return 0;
    if (field(s, "secret-key", &value))
        return err_set(err, ERR_SECURITY,
                       "%s line %d holds a secret key: a list of clients takes their public keys only "
                       "(the .pub files)",
                       path, line_no);
    if (field(s, "public-key", &value)) {
        if (!starts_with_key(value) || value[TP_KEY_Z85_LEN] != '\0')
            return err_set(err, ERR_MALFORMED, "%s line %d: the public-key is not a valid key (%d Z85 characters)",
                           path, line_no, TP_KEY_Z85_LEN);
        return clients_add(c, value, path, line_no, err);
    }
    /* '#' is a Z85 character, but never the first of a key: it stands for 84 * 85^4, past 2^32. */
    if (s[0] == '#')
        return 0;
    if (starts_with_key(s))
        return clients_add(c, s, path, line_no, err);
    return err_set(err, ERR_MALFORMED,
                   "%s line %d: not a client key (expected %d Z85 characters, `public-key = KEY` or a # comment)",
                   path, line_no, TP_KEY_Z85_LEN);
}

static int check_mode(const char *path, const struct stat *st, err_msg *err) {
    if (st->st_mode & S_IWOTH)
        return err_set(err, ERR_SECURITY,
                       "%s can be written by every user, who could add their own key: run `chmod o-w %s`", path,
                       path);
    return 0;
}

static int parse_text(tp_clients *c, char *text, const char *path, err_msg *err) {
    int line_no = 0;
    for (char *line = text, *next; line != NULL; line = next) {
        next = strchr(line, '\n');
        if (next != NULL)
            *next++ = '\0';
        line_no++;
        while (is_blank(*line))
            line++;
        size_t n = strlen(line);
        while (n > 0 && is_blank(line[n - 1]))
            line[--n] = '\0';
        int rc = parse_line(c, line, path, line_no, err);
        if (rc < 0)
            return rc;
    }
    return 0;
}

static int load_file(tp_clients *c, const char *path, err_msg *err) {
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0)
        return err_set(err, errno == ENOENT ? ERR_NOENT : errno == EACCES ? ERR_PERM : ERR_IO,
                       "cannot open the list of clients %s: %s", path, strerror(errno));
    struct stat st;
    int rc = 0;
    char *text = NULL;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode))
        rc = err_set(err, ERR_INVAL, "%s is not a regular file", path);
    else if ((rc = check_mode(path, &st, err)) == 0 && (uint64_t)st.st_size > CLIENTS_FILE_MAX)
        rc = err_set(err, ERR_LIMIT, "%s is too large to be a list of client keys (over %u MiB)", path,
                     CLIENTS_FILE_MAX >> 20);
    if (rc == 0 && (text = malloc((size_t)st.st_size + 1)) == NULL)
        rc = err_set(err, ERR_NOMEM, "out of memory");
    if (rc == 0) {
        /* The size is read once: a file that grows meanwhile is read up to what fstat said. */
        ssize_t n = cm_read_full(fd, text, (size_t)st.st_size, -1);
        if (n < 0)
            rc = err_set(err, ERR_IO, "cannot read %s: %s", path, strerror(errno));
        else if (memchr(text, '\0', (size_t)n) != NULL)
            rc = err_set(err, ERR_MALFORMED, "%s is not a text file", path);
        else
            text[n] = '\0';
    }
    close(fd);
    size_t before = c->n;
    if (rc == 0)
        rc = parse_text(c, text, path, err);
    if (rc == 0 && c->n == before)
        rc = err_set(err, ERR_MALFORMED, "%s holds no client key", path);
    free(text);
    return rc;
}

static int load_dir(tp_clients *c, const char *path, err_msg *err) {
    DIR *d = opendir(path);
    if (d == NULL)
        return err_set(err, errno == EACCES ? ERR_PERM : ERR_IO, "cannot list %s: %s", path, strerror(errno));
    int rc = 0;
    size_t files = 0;
    for (struct dirent *e; rc == 0 && (e = readdir(d)) != NULL;) {
        size_t n = strlen(e->d_name);
        if (e->d_name[0] == '.' || n < 5 || strcmp(e->d_name + n - 4, ".pub") != 0)
            continue;
        char file[PATH_MAX];
        if (snprintf(file, sizeof file, "%s/%s", path, e->d_name) >= (int)sizeof file)
            rc = err_set(err, ERR_LIMIT, "%s/%s: file name too long", path, e->d_name);
        else if (++files > TP_CLIENTS_MAX)
            rc = err_set(err, ERR_LIMIT, "%s: more than %d .pub files", path, TP_CLIENTS_MAX);
        else
            rc = load_file(c, file, err);
    }
    closedir(d);
    if (rc == 0 && files == 0)
        rc = err_set(err, ERR_NOENT, "%s holds no .pub file: no client could connect", path);
    return rc;
}

tp_clients *tp_clients_load(const char *path, err_msg *err) {
    struct stat st;
    if (path == NULL || path[0] == '\0') {
        err_set(err, ERR_INVAL, "no list of clients given");
        return NULL;
    }
    if (stat(path, &st) != 0) {
        err_set(err, errno == ENOENT ? ERR_NOENT : errno == EACCES ? ERR_PERM : ERR_IO,
                "cannot read the list of clients %s: %s", path, strerror(errno));
        return NULL;
    }
    tp_clients *c = calloc(1, sizeof *c);
    if (c == NULL) {
        err_set(err, ERR_NOMEM, "out of memory");
        return NULL;
    }
    int rc = S_ISDIR(st.st_mode) ? (check_mode(path, &st, err) < 0 ? ERR_SECURITY : load_dir(c, path, err))
                                 : load_file(c, path, err);
    if (rc < 0) {
        tp_clients_destroy(&c);
        return NULL;
    }
    qsort(c->keys, c->n, sizeof *c->keys, key_cmp);
    size_t kept = 0;
    for (size_t i = 0; i < c->n; i++)
        if (kept == 0 || memcmp(c->keys[kept - 1], c->keys[i], 32) != 0)
            memmove(c->keys[kept++], c->keys[i], 32);
    c->n = kept;
    return c;
}

void tp_clients_destroy(tp_clients **cp) {
    if (cp == NULL || *cp == NULL)
        return;
    free((*cp)->keys);
    free(*cp);
    *cp = NULL;
}

size_t tp_clients_count(const tp_clients *c) { return c != NULL ? c->n : 0; }

int tp_clients_has(const tp_clients *c, const uint8_t key[32]) {
    return c != NULL && c->n > 0 && bsearch(key, c->keys, c->n, sizeof *c->keys, key_cmp) != NULL;
}

tp_clients *net_clients_copy(const tp_clients *c) {
    tp_clients *d = calloc(1, sizeof *d);
    if (d == NULL)
        return NULL;
    if (c->n > 0 && (d->keys = malloc(c->n * sizeof *d->keys)) == NULL) {
        free(d);
        return NULL;
    }
    if (c->n > 0)
        memcpy(d->keys, c->keys, c->n * sizeof *d->keys);
    d->n = d->cap = c->n;
    return d;
}
