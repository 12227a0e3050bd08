/*
 * CURVE keys for the ZeroMQ transport (net.h): making a server or client key pair, writing it to
 * disk the way ssh keeps private keys (0600, never overwritten, refused when others can read it),
 * reading it back with every byte checked, accepting a public key given inline or as a file, and
 * where this user's own client pair lives (as ssh's ~/.ssh/id_*).
 *
 * Files are text, one `name = value` per line, `#` comments allowed:
 *   BASE.key   public-key = <40 Z85 characters>
 *              secret-key = <40 Z85 characters>
 *   BASE.pub   public-key = <40 Z85 characters>
 */
#include "io.h"
#include "net_curve.h"
#include "synctop/net.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zmq.h>

#define KEY_FILE_MAX 4096 /* a key file is a few lines; anything longer is not one */

static int z85_key_ok(const char *s) {
    uint8_t bin[32];
    return strlen(s) == TP_KEY_Z85_LEN && zmq_z85_decode(bin, s) != NULL;
}

int tp_curve_available(err_msg *err) {
    if (!zmq_has("curve"))
        return err_set(err, ERR_UNSUPPORTED,
                          "this libzmq (%d.%d.%d) was built without CURVE encryption "
                          "(zmq_has(\"curve\") is false): install a libzmq built with libsodium",
                          ZMQ_VERSION_MAJOR, ZMQ_VERSION_MINOR, ZMQ_VERSION_PATCH);
    return 0;
}

int tp_keypair_new(tp_keypair *kp, err_msg *err) {
    memset(kp, 0, sizeof *kp);
    int rc = tp_curve_available(err);
    if (rc < 0)
        return rc;
    if (zmq_curve_keypair(kp->public_key, kp->secret_key) != 0)
        return err_set(err, ERR_ZMQ, "cannot generate a CURVE key pair: %s",
                          zmq_strerror(zmq_errno()));
    return 0;
}

int tp_keypair_check(const tp_keypair *kp, err_msg *err) {
    if (memchr(kp->public_key, '\0', sizeof kp->public_key) == NULL ||
        !z85_key_ok(kp->public_key))
        return err_set(err, ERR_INVAL, "the public key is not %d characters of Z85",
                          TP_KEY_Z85_LEN);
    if (kp->secret_key[0] == '\0')
        return 0;
    if (memchr(kp->secret_key, '\0', sizeof kp->secret_key) == NULL ||
        !z85_key_ok(kp->secret_key))
        return err_set(err, ERR_INVAL, "the secret key is not %d characters of Z85",
                          TP_KEY_Z85_LEN);
    int rc = tp_curve_available(err);
    if (rc < 0)
        return rc;
    char derived[TP_KEY_Z85_LEN + 1];
    if (zmq_curve_public(derived, kp->secret_key) != 0)
        return err_set(err, ERR_ZMQ, "cannot derive the public key: %s",
                          zmq_strerror(zmq_errno()));
    if (strcmp(derived, kp->public_key) != 0)
        return err_set(err, ERR_INVAL, "the public key does not belong to the secret key");
    return 0;
}

/* Creates path (never replacing anything) with exactly this mode and content. */
static int write_new_file(const char *path, mode_t mode, const char *text, err_msg *err) {
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
    if (fd < 0) {
        if (errno == EEXIST)
            return err_set(err, ERR_EXIST,
                              "%s already exists; refusing to overwrite a key file "
                              "(choose another name with -o, or remove it first)",
                              path);
        return err_set(err, errno == EACCES ? ERR_PERM : ERR_IO, "cannot create %s: %s", path,
                          strerror(errno));
    }
    int rc = 0;
    /* fchmod: the umask must not decide who can read a key. */
    if (fchmod(fd, mode) != 0 || cm_write_full(fd, text, strlen(text)) != 0 || fsync(fd) != 0)
        rc = err_set(err, ERR_IO, "cannot write %s: %s", path, strerror(errno));
    if (close(fd) != 0 && rc == 0)
        rc = err_set(err, ERR_IO, "cannot write %s: %s", path, strerror(errno));
    if (rc < 0)
        unlink(path);
    return rc;
}

/* Writes BASE.key and BASE.pub, their comments saying whose keys they are. */
static int keypair_save(const tp_keypair *kp, const char *base, int client, err_msg *err) {
    if (base == NULL || base[0] == '\0')
        return err_set(err, ERR_INVAL, "no file name given for the keys");
    int rc = tp_keypair_check(kp, err);
    if (rc < 0)
        return rc;
    if (kp->secret_key[0] == '\0')
        return err_set(err, ERR_INVAL, "no secret key to save");
    char key_path[PATH_MAX], pub_path[PATH_MAX];
    if (snprintf(key_path, sizeof key_path, "%s.key", base) >= (int)sizeof key_path ||
        snprintf(pub_path, sizeof pub_path, "%s.pub", base) >= (int)sizeof pub_path)
        return err_set(err, ERR_LIMIT, "file name too long");
    struct stat st;
    /* Check both first so that a refusal leaves nothing half-written behind. */
    if (lstat(key_path, &st) == 0 || lstat(pub_path, &st) == 0)
        return err_set(err, ERR_EXIST,
                          "%s already exists; refusing to overwrite a key file "
                          "(choose another name with -o, or remove it first)",
                          lstat(key_path, &st) == 0 ? key_path : pub_path);
    char text[512];
    if (client)
        snprintf(text, sizeof text,
                 "# synctop CURVE client key pair (synctop keygen --client). Keep it secret: whoever\n"
                 "# holds it can watch wherever its public key is listed.\n"
                 "public-key = %s\n"
                 "secret-key = %s\n",
                 kp->public_key, kp->secret_key);
    else
        snprintf(text, sizeof text,
                 "# synctop CURVE server key pair (synctop keygen). Keep it secret: whoever holds it\n"
                 "# can publish as this server.\n"
                 "public-key = %s\n"
                 "secret-key = %s\n",
                 kp->public_key, kp->secret_key);
    rc = write_new_file(key_path, 0600, text, err);
    memset(text, 0, sizeof text);
    if (rc < 0)
        return rc;
    snprintf(text, sizeof text,
             client ? "# synctop CURVE client public key (synctop keygen --client): a publisher's\n"
                      "# --clients list admits the client that holds its secret half.\n"
                      "public-key = %s\n"
                    : "# synctop CURVE server public key (synctop keygen): subscribers pin it.\n"
                      "public-key = %s\n",
             kp->public_key);
    rc = write_new_file(pub_path, 0644, text, err);
    if (rc < 0)
        unlink(key_path);
    return rc;
}

int tp_keypair_save(const tp_keypair *kp, const char *base, err_msg *err) {
    return keypair_save(kp, base, 0, err);
}

int tp_keypair_save_client(const tp_keypair *kp, const char *base, err_msg *err) {
    return keypair_save(kp, base, 1, err);
}

int tp_client_key_base(char *out, size_t outlen, err_msg *err) {
    const char *config = getenv("XDG_CONFIG_HOME"), *home = getenv("HOME");
    int n;
    /* The base directory spec: a relative XDG_CONFIG_HOME is invalid and ignored. */
    if (config != NULL && config[0] == '/')
        n = snprintf(out, outlen, "%s/synctop/client", config);
    else if (home != NULL && home[0] != '\0')
        n = snprintf(out, outlen, "%s/.config/synctop/client", home);
    else
        return err_set(err, ERR_NOENT, "neither XDG_CONFIG_HOME nor HOME is set: no place for a client key");
    if (n < 0 || (size_t)n >= outlen)
        return err_set(err, ERR_LIMIT, "the client key's path is too long");
    return 0;
}

static char *trim(char *s) {
    while (*s == ' ' || *s == '\t')
        s++;
    size_t n = strlen(s);
    while (n > 0 && (s[n - 1] == ' ' || s[n - 1] == '\t' || s[n - 1] == '\r'))
        s[--n] = '\0';
    return s;
}

/* Parses the text of a key file into kp. Messages name the file and line, never a key. */
static int parse_keys(char *text, tp_keypair *kp, const char *path, err_msg *err) {
    int line_no = 0;
    char *save = NULL;
    for (char *line = text; line != NULL; line = save) {
        save = strchr(line, '\n');
        if (save != NULL)
            *save++ = '\0';
        line_no++;
        char *s = trim(line);
        if (s[0] == '\0' || s[0] == '#')
            continue;
        char *eq = strchr(s, '=');
        if (eq == NULL)
            return err_set(err, ERR_MALFORMED,
                              "%s line %d: expected 'public-key = ...' or 'secret-key = ...'",
                              path, line_no);
        *eq = '\0';
        char *name = trim(s), *value = trim(eq + 1);
        char *dst;
        if (strcmp(name, "public-key") == 0)
            dst = kp->public_key;
        else if (strcmp(name, "secret-key") == 0)
            dst = kp->secret_key;
        else
            return err_set(err, ERR_MALFORMED,
                              "%s line %d: unknown field (expected public-key or secret-key)",
                              path, line_no);
        if (dst[0] != '\0')
            return err_set(err, ERR_MALFORMED, "%s line %d: %s given twice", path, line_no,
                              name);
        if (!z85_key_ok(value))
            return err_set(err, ERR_MALFORMED,
                              "%s line %d: the %s is not a valid key (expected %d Z85 "
                              "characters, found %zu characters%s)",
                              path, line_no, name, TP_KEY_Z85_LEN, strlen(value),
                              strlen(value) == TP_KEY_Z85_LEN ? " that do not decode" : "");
        memcpy(dst, value, TP_KEY_Z85_LEN + 1);
    }
    if (kp->public_key[0] == '\0')
        return err_set(err, ERR_MALFORMED, "%s: no public-key line (is it a synctop key file?)",
                          path);
    return 0;
}

int tp_keypair_load(tp_keypair *kp, const char *path, err_msg *err) {
    memset(kp, 0, sizeof *kp);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return err_set(err, errno == ENOENT ? ERR_NOENT : errno == EACCES ? ERR_PERM : ERR_IO,
                          "cannot open key file %s: %s", path, strerror(errno));
    char text[KEY_FILE_MAX + 1];
    size_t len = 0;
    struct stat st;
    int rc = 0;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode))
        rc = err_set(err, ERR_INVAL, "%s is not a regular file", path);
    if (rc == 0) {
        ssize_t n = cm_read_full(fd, text, sizeof text, -1);
        if (n < 0)
            rc = err_set(err, ERR_IO, "cannot read %s: %s", path, strerror(errno));
        else
            len = (size_t)n;
    }
    close(fd);
    if (rc == 0 && len > KEY_FILE_MAX)
        rc = err_set(err, ERR_MALFORMED, "%s is too large to be a key file", path);
    if (rc == 0 && memchr(text, '\0', len) != NULL)
        rc = err_set(err, ERR_MALFORMED, "%s is not a text file", path);
    if (rc == 0) {
        text[len] = '\0';
        rc = parse_keys(text, kp, path, err);
    }
    memset(text, 0, sizeof text);
    if (rc == 0 && kp->secret_key[0] != '\0') {
        if (st.st_mode & 077)
            rc = err_set(err, ERR_SECURITY,
                            "%s holds a secret key but others can read it (mode %03o); "
                            "run `chmod 600 %s`",
                            path, (unsigned)(st.st_mode & 0777), path);
        else if ((rc = tp_keypair_check(kp, err)) < 0 && rc != ERR_UNSUPPORTED)
            rc = err_set(err, ERR_MALFORMED,
                            "%s: the public key does not match the secret key (damaged file?)",
                            path);
    }
    if (rc < 0)
        memset(kp, 0, sizeof *kp);
    return rc;
}

int tp_public_key_resolve(const char *spec, char out[TP_KEY_Z85_LEN + 1], err_msg *err) {
    if (spec == NULL || spec[0] == '\0')
        return err_set(err, ERR_INVAL, "empty key");
    struct stat st;
    /* Z85 can contain '/' and '.', so a file of that name wins over an inline key. */
    if (stat(spec, &st) == 0) {
        tp_keypair kp;
        int rc = tp_keypair_load(&kp, spec, err);
        if (rc < 0)
            return rc;
        memcpy(out, kp.public_key, TP_KEY_Z85_LEN + 1);
        memset(&kp, 0, sizeof kp);
        return 0;
    }
    if (z85_key_ok(spec)) {
        memcpy(out, spec, TP_KEY_Z85_LEN + 1);
        return 0;
    }
    if (strlen(spec) == TP_KEY_Z85_LEN)
        return err_set(err, ERR_INVAL, "'%s' is not a valid Z85 key", spec);
    return err_set(err, ERR_NOENT,
                      "no key file %s, and it is not a %d-character Z85 key either", spec,
                      TP_KEY_Z85_LEN);
}

int net_curve_client(void *sock, const char *server_key, const tp_keypair *client,
                     char used_public[TP_KEY_Z85_LEN + 1], err_msg *err) {
    tp_keypair server, mine;
    memset(&server, 0, sizeof server);
    if (strlen(server_key) != TP_KEY_Z85_LEN)
        return err_set(err, ERR_INVAL, "the server key is not %d characters of Z85", TP_KEY_Z85_LEN);
    memcpy(server.public_key, server_key, TP_KEY_Z85_LEN);
    int rc = tp_keypair_check(&server, err);
    if (rc < 0)
        return rc;
    /* Without a pair of its own a client takes a throwaway one: a publisher that checks its
     * clients refuses it, one that does not only needs the session private. */
    if (client != NULL) {
        if (client->secret_key[0] == '\0')
            return err_set(err, ERR_INVAL, "the client key needs its secret half (the .key file)");
        if ((rc = tp_keypair_check(client, err)) < 0)
            return rc;
        mine = *client;
    } else if ((rc = tp_keypair_new(&mine, err)) < 0) {
        return rc;
    }
    rc = zmq_setsockopt(sock, ZMQ_CURVE_SERVERKEY, server.public_key, TP_KEY_Z85_LEN) != 0 ||
         zmq_setsockopt(sock, ZMQ_CURVE_PUBLICKEY, mine.public_key, TP_KEY_Z85_LEN) != 0 ||
         zmq_setsockopt(sock, ZMQ_CURVE_SECRETKEY, mine.secret_key, TP_KEY_Z85_LEN) != 0;
    if (used_public != NULL)
        memcpy(used_public, mine.public_key, TP_KEY_Z85_LEN + 1);
    explicit_bzero(&mine, sizeof mine);
    if (rc)
        return err_set(err, ERR_ZMQ, "cannot set up CURVE encryption: %s", zmq_strerror(zmq_errno()));
    return 0;
}
