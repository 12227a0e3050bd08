/*
 * Endpoints of the ZeroMQ transport (net.h): the user's private directory for ipc sockets, the
 * PID.sock naming that `synctop attach PID` relies on, what counts as loopback for tcp, turning
 * what a user typed into an endpoint, and the clean-up of socket files left by killed processes.
 *
 * The directory is the only thing that keeps other users away from an ipc publisher, so it is
 * checked every time: a symlink, a directory owned by someone else or one open to group/others
 * is refused rather than repaired.
 */
#include "synctop/net.h"
#include "synctop/sanitize.h"
#include "net_bind.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <limits.h>
#include <signal.h>
#include <stddef.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

/* snprintf into out, failing with ERR_LIMIT instead of truncating. */
static int put(char *out, size_t outlen, err_msg *err, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static int put(char *out, size_t outlen, err_msg *err, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(out, outlen, fmt, ap);
    va_end(ap);
    if (n < 0 || (size_t)n >= outlen)
        return err_set(err, ERR_LIMIT, "endpoint too long (%d bytes, room for %zu)", n,
                          outlen > 0 ? outlen - 1 : 0);
    return 0;
}

/* XDG_RUNTIME_DIR is used only when it is an existing directory of ours that we can write. */
static int xdg_usable(const char *xdg) {
    struct stat st;
    if (xdg == NULL || xdg[0] != '/')
        return 0;
    if (stat(xdg, &st) != 0 || !S_ISDIR(st.st_mode) || st.st_uid != geteuid())
        return 0;
    return access(xdg, W_OK | X_OK) == 0;
}

/* Creates path 0700 if missing; refuses anything an attacker could have prepared. */
static int private_dir(const char *path, err_msg *err) {
    int created = 0;
    if (mkdir(path, 0700) == 0)
        created = 1;
    else if (errno != EEXIST)
        return err_set(err, ERR_IO, "cannot create the socket directory %s: %s", path,
                          strerror(errno));
    struct stat st;
    if (lstat(path, &st) != 0)
        return err_set(err, ERR_IO, "cannot inspect the socket directory %s: %s", path,
                          strerror(errno));
    if (S_ISLNK(st.st_mode))
        return err_set(err, ERR_SECURITY,
                          "the socket directory %s is a symbolic link; refusing to use it "
                          "(someone could redirect synctop's sockets): remove it",
                          path);
    if (!S_ISDIR(st.st_mode))
        return err_set(err, ERR_SECURITY, "the socket directory %s is not a directory: remove it",
                          path);
    if (st.st_uid != geteuid())
        return err_set(err, ERR_SECURITY,
                          "the socket directory %s belongs to uid %u, not to you (uid %u); "
                          "refusing to use it: remove it",
                          path, (unsigned)st.st_uid, (unsigned)geteuid());
    if (created && (st.st_mode & 07777) != 0700) {
        /* The umask decided the mode of what we just made; make it exactly private. */
        if (chmod(path, 0700) != 0 || lstat(path, &st) != 0)
            return err_set(err, ERR_IO, "cannot make %s private: %s", path, strerror(errno));
    }
    if (st.st_mode & 077)
        return err_set(err, ERR_SECURITY,
                          "the socket directory %s is accessible by group or others (mode %03o); "
                          "refusing to use it: run `chmod 700 %s` or remove it",
                          path, (unsigned)(st.st_mode & 0777), path);
    return 0;
}

/* mkdir -p of the directories above path that are missing, private (0700) when it makes them. */
static void make_parents(const char *path) {
    char p[PATH_MAX];
    snprintf(p, sizeof p, "%s", path);
    for (char *slash = strchr(p + 1, '/'); slash != NULL; slash = strchr(slash + 1, '/')) {
        *slash = '\0';
        mkdir(p, 0700);
        *slash = '/';
    }
}

/* Where sockets go when the shared temporary directory's one was spoiled by someone else:
 * $HOME/.cache/synctop/HOST (per host: a home directory may be shared between machines). */
static int home_dir(char *path, size_t len) {
    const char *home = getenv("HOME");
    char host[256] = "localhost";
    struct stat st;
    if (home == NULL || home[0] != '/' || stat(home, &st) != 0 || st.st_uid != geteuid())
        return -1;
    gethostname(host, sizeof host - 1);
    host[sizeof host - 1] = '\0';
    for (char *c = host; *c; c++)
        if (*c == '/')
            *c = '_';
    int n = snprintf(path, len, "%s/.cache/synctop/%s", home, host);
    if (n < 0 || (size_t)n >= len)
        return -1;
    make_parents(path);
    return 0;
}

int tp_endpoint_dir(char *out, size_t outlen, err_msg *err) {
    char path[PATH_MAX];
    const char *xdg = getenv("XDG_RUNTIME_DIR"), *tmp = getenv("TMPDIR");
    int n;
    if (xdg_usable(xdg))
        n = snprintf(path, sizeof path, "%s/synctop", xdg);
    else
        n = snprintf(path, sizeof path, "%s/synctop-%u", tmp != NULL && tmp[0] == '/' ? tmp : "/tmp",
                     (unsigned)geteuid());
    if (n < 0 || (size_t)n >= sizeof path)
        return err_set(err, ERR_LIMIT, "%s is too long", xdg_usable(xdg) ? "XDG_RUNTIME_DIR" : "TMPDIR");
    int rc = private_dir(path, err);
    if (rc == ERR_SECURITY && !xdg_usable(xdg)) {
        /* Another user can spoil a shared temporary directory's entry: step aside to our own. */
        char home[PATH_MAX];
        err_msg why;
        if (home_dir(home, sizeof home) == 0 && private_dir(home, &why) == 0) {
            if ((rc = put(out, outlen, err, "%s", home)) < 0)
                return rc;
            return 1;
        }
        return rc;
    }
    if (rc < 0)
        return rc;
    return put(out, outlen, err, "%s", path);
}

int tp_endpoint_for_pid(long pid, char *out, size_t outlen, err_msg *err) {
    if (pid <= 0)
        return err_set(err, ERR_INVAL, "invalid pid %ld", pid);
    char dir[PATH_MAX];
    int rc = tp_endpoint_dir(dir, sizeof dir, err);
    if (rc < 0)
        return rc;
    struct sockaddr_un sa;
    char path[PATH_MAX + 32];
    snprintf(path, sizeof path, "%s/%ld.sock", dir, pid);
    if (strlen(path) >= sizeof sa.sun_path)
        return err_set(err, ERR_LIMIT,
                          "socket path %s is longer than a unix socket allows (%zu bytes): "
                          "set XDG_RUNTIME_DIR to a shorter directory",
                          path, sizeof sa.sun_path - 1);
    return put(out, outlen, err, "ipc://%s", path);
}

/* Splits "tcp://HOST:PORT" into host (brackets removed) and checks the port. */
static int tcp_host(const char *endpoint, char *host, size_t hostlen) {
    if (strncmp(endpoint, "tcp://", 6) != 0)
        return ERR_INVAL;
    const char *rest = endpoint + 6;
    if (strchr(rest, ';') != NULL) /* a source address: only for connecting */
        return ERR_INVAL;
    const char *colon, *h = rest, *hend;
    if (rest[0] == '[') {
        hend = strchr(rest, ']');
        if (hend == NULL || hend[1] != ':')
            return ERR_INVAL;
        h = rest + 1;
        colon = hend + 1;
    } else {
        colon = strrchr(rest, ':');
        if (colon == NULL)
            return ERR_INVAL;
        hend = colon;
    }
    const char *port = colon + 1;
    if (strcmp(port, "*") != 0) {
        size_t n = strlen(port);
        if (n == 0 || n > 5 || strspn(port, "0123456789") != n || atol(port) > 65535)
            return ERR_INVAL;
    }
    size_t hl = (size_t)(hend - h);
    if (hl == 0 || hl >= hostlen)
        return ERR_INVAL;
    memcpy(host, h, hl);
    host[hl] = '\0';
    return 0;
}

int tp_endpoint_is_loopback(const char *endpoint) {
    char host[256];
    if (endpoint == NULL || tcp_host(endpoint, host, sizeof host) < 0)
        return ERR_INVAL;
    if (strcasecmp(host, "localhost") == 0)
        return 1;
    struct in_addr a4;
    if (inet_pton(AF_INET, host, &a4) == 1)
        return (ntohl(a4.s_addr) >> 24) == 127;
    struct in6_addr a6;
    if (inet_pton(AF_INET6, host, &a6) == 1) {
        if (IN6_IS_ADDR_LOOPBACK(&a6))
            return 1;
        return IN6_IS_ADDR_V4MAPPED(&a6) && a6.s6_addr[12] == 127;
    }
    return 0; /* "*", a host or interface name: not known to stay on this machine */
}

static int check_tcp(const char *endpoint, const char *spec, err_msg *err) {
    if (tp_endpoint_is_loopback(endpoint) < 0)
        return err_set(err, ERR_INVAL,
                       "cannot understand tcp endpoint '%s': expected HOST:PORT, the port a number from 1 to "
                       "65535 (or * to bind any)",
                       spec);
    return 0;
}

/* "localhost" as 127.0.0.1, which libzmq binds (it binds addresses and interfaces, not names) and
 * connects to alike. */
static int tcp_localhost_as_ip(char *out, size_t outlen, err_msg *err) {
    char host[256];
    if (tcp_host(out, host, sizeof host) < 0 || strcasecmp(host, "localhost") != 0)
        return 0;
    char port[16];
    snprintf(port, sizeof port, "%s", strrchr(out, ':') + 1);
    return put(out, outlen, err, "tcp://127.0.0.1:%s", port);
}

int tp_endpoint_resolve(const char *spec, char *out, size_t outlen, err_msg *err) {
    if (spec == NULL || spec[0] == '\0')
        return err_set(err, ERR_INVAL, "empty endpoint");
    size_t n = strlen(spec);
    int rc;
    if (strspn(spec, "0123456789") == n) {
        errno = 0;
        long pid = strtol(spec, NULL, 10);
        if (errno != 0 || pid <= 0)
            return err_set(err, ERR_INVAL, "invalid pid '%s'", spec);
        return tp_endpoint_for_pid(pid, out, outlen, err);
    }
    if (strncmp(spec, "tcp://:", 7) == 0)
        rc = put(out, outlen, err, "tcp://127.0.0.1%s", spec + 6);
    else if (strncmp(spec, "tcp://", 6) == 0)
        rc = put(out, outlen, err, "%s", spec);
    else if (strstr(spec, "://") != NULL)
        return put(out, outlen, err, "%s", spec); /* the publisher allows only tcp and ipc files */
    else if (spec[0] == '/' || strncmp(spec, "./", 2) == 0)
        return put(out, outlen, err, "ipc://%s", spec);
    else if (spec[0] == ':')
        rc = put(out, outlen, err, "tcp://127.0.0.1%s", spec);
    else if (strchr(spec, ':') != NULL)
        rc = put(out, outlen, err, "tcp://%s", spec);
    else
        return err_set(err, ERR_INVAL,
                          "cannot understand endpoint '%s': expected PID, HOST:PORT, :PORT, "
                          "tcp://HOST:PORT or ipc://PATH",
                          spec);
    if (rc < 0 || (rc = check_tcp(out, spec, err)) < 0)
        return rc;
    return tcp_localhost_as_ip(out, outlen, err);
}

int tp_endpoint_host_found(const char *endpoint, err_msg *err) {
    char host[256];
    if (tcp_host(endpoint, host, sizeof host) < 0 || strcmp(host, "*") == 0)
        return 0;
    struct in_addr a4;
    struct in6_addr a6;
    if (inet_pton(AF_INET, host, &a4) == 1 || inet_pton(AF_INET6, host, &a6) == 1)
        return 0;
    struct addrinfo hints = {.ai_socktype = SOCK_STREAM}, *res = NULL;
    int rc = getaddrinfo(host, NULL, &hints, &res);
    if (res != NULL)
        freeaddrinfo(res);
    if (rc == EAI_NONAME || rc == EAI_FAIL
#ifdef EAI_NODATA
        || rc == EAI_NODATA
#endif
    ) {
        char shown[256];
        tp_sanitize(shown, sizeof shown, host, strlen(host), NULL);
        return err_set(err, ERR_NOENT, "no host named '%s' is known to this machine (%s)", shown, gai_strerror(rc));
    }
    return 0;
}

/* Tries to connect to a unix socket: 1 someone listens, 0 nobody, or a negative code. */
static int unix_listening(const char *path) {
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    if (path[0] == '\0' || strlen(path) >= sizeof sa.sun_path)
        return ERR_INVAL;
    memcpy(sa.sun_path, path, strlen(path));
    if (path[0] == '@') /* abstract namespace, as libzmq spells it */
        sa.sun_path[0] = '\0';
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0)
        return ERR_IO;
    socklen_t len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + strlen(path));
    int rc = connect(fd, (struct sockaddr *)&sa, len);
    int e = errno;
    close(fd);
    if (rc == 0 || e == EAGAIN || e == EINPROGRESS)
        return 1; /* a full backlog still means a live listener */
    if (e == ECONNREFUSED || e == ENOENT)
        return 0;
    return e == EACCES || e == EPERM ? ERR_PERM : ERR_IO;
}

int tp_endpoint_is_live(const char *endpoint) {
    if (endpoint == NULL || strncmp(endpoint, "ipc://", 6) != 0)
        return ERR_INVAL;
    return unix_listening(endpoint + 6);
}

/* Tries a TCP connection to host:port, waiting at most 300 ms: 1 someone listens, 0 nobody. */
static int tcp_listening(const char *host, const char *port) {
    struct addrinfo hints = {.ai_socktype = SOCK_STREAM}, *ai = NULL;
    if (getaddrinfo(strcmp(host, "*") == 0 ? "127.0.0.1" : host, port, &hints, &ai) != 0 || ai == NULL)
        return 0;
    int found = 0;
    for (const struct addrinfo *a = ai; a != NULL && !found; a = a->ai_next) {
        int fd = socket(a->ai_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        if (fd < 0)
            continue;
        if (connect(fd, a->ai_addr, a->ai_addrlen) == 0) {
            found = 1;
        } else if (errno == EINPROGRESS) {
            struct pollfd pf = {.fd = fd, .events = POLLOUT};
            int e = 0;
            socklen_t el = sizeof e;
            found = poll(&pf, 1, 300) == 1 && getsockopt(fd, SOL_SOCKET, SO_ERROR, &e, &el) == 0 && e == 0;
        }
        close(fd);
    }
    freeaddrinfo(ai);
    return found;
}

int tp_endpoint_in_use(const char *endpoint) {
    if (endpoint != NULL && strncmp(endpoint, "ipc://", 6) == 0)
        return endpoint[6] == '@' ? 0 : tp_endpoint_is_live(endpoint);
    char host[256];
    if (endpoint == NULL || tcp_host(endpoint, host, sizeof host) < 0)
        return ERR_INVAL;
    const char *port = strrchr(endpoint, ':') + 1;
    return strcmp(port, "*") == 0 ? 0 : tcp_listening(host, port);
}

int tp_endpoint_each(void (*each)(void *ctx, long pid, const char *endpoint), void *ctx, err_msg *err) {
    char dir[PATH_MAX];
    int rc = tp_endpoint_dir(dir, sizeof dir, err);
    if (rc < 0)
        return rc;
    DIR *d = opendir(dir);
    if (d == NULL)
        return err_set(err, ERR_IO, "cannot list %s: %s", dir, strerror(errno));
    int n = 0;
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        const char *name = de->d_name;
        size_t digits = strspn(name, "0123456789");
        if (digits == 0 || digits > 9 || strcmp(name + digits, ".sock") != 0)
            continue;
        char ep[PATH_MAX + 32];
        snprintf(ep, sizeof ep, "ipc://%s/%.15s", dir, name); /* at most 9 digits + ".sock" */
        each(ctx, strtol(name, NULL, 10), ep);
        n++;
    }
    closedir(d);
    return n;
}

/* Removes one endpoint's socket file when its process is gone and nobody listens on it. */
static void remove_if_stale(void *ctx, long pid, const char *endpoint) {
    int *removed = ctx;
    const char *path = endpoint + 6;
    struct stat st;
    /* EPERM: the pid exists (someone else's now, perhaps); leave the file alone. */
    if (pid <= 0 || kill((pid_t)pid, 0) == 0 || errno != ESRCH)
        return;
    if (lstat(path, &st) != 0 || !S_ISSOCK(st.st_mode) || st.st_uid != geteuid())
        return;
    /* The pid may belong to another pid namespace sharing this directory: ask the socket. */
    if (unix_listening(path) != 0)
        return;
    if (unlink(path) == 0)
        (*removed)++;
}

int tp_endpoint_remove_stale(err_msg *err) {
    int removed = 0;
    int rc = tp_endpoint_each(remove_if_stale, &removed, err);
    return rc < 0 ? rc : removed;
}

int net_bind_check(const char *ep, const tp_keypair *curve, int insecure, err_msg *err) {
    int rc;
    if (curve != NULL) {
        if ((rc = tp_curve_available(err)) < 0)
            return rc;
        if (curve->secret_key[0] == '\0')
            return err_set(err, ERR_INVAL,
                              "publishing with CURVE needs the server's secret key (the .key "
                              "file), not only its public key");
        if ((rc = tp_keypair_check(curve, err)) < 0)
            return rc;
    }
    if (strncmp(ep, "tcp://", 6) == 0) {
        int lo = tp_endpoint_is_loopback(ep);
        if (lo < 0)
            return err_set(err, ERR_INVAL, "cannot understand tcp endpoint %s", ep);
        if (lo == 0 && curve == NULL && !insecure)
            return err_set(err, ERR_SECURITY,
                              "refusing to publish on %s without encryption: anyone who can "
                              "reach it could read the trace. Create keys with `synctop keygen` "
                              "and publish with them, or pass --insecure to publish in the clear",
                              ep);
    } else if (strncmp(ep, "ipc://", 6) == 0 && ep[6] != '@') {
        struct sockaddr_un sa;
        if (strlen(ep + 6) >= sizeof sa.sun_path)
            return err_set(err, ERR_LIMIT, "socket path %s is longer than %zu bytes", ep + 6,
                              sizeof sa.sun_path - 1);
        /* libzmq unlinks an existing file before binding: do not steal a live publisher's. */
        if (tp_endpoint_is_live(ep) == 1)
            return err_set(err, ERR_EXIST, "another publisher is already listening on %s", ep);
    } else if (strncmp(ep, "ipc://@", 7) == 0) {
        return err_set(err, ERR_SECURITY,
                       "refusing to publish on %s: an abstract socket has no file permissions, so "
                       "every local user could read the trace; give a file path (ipc:///PATH)",
                       ep);
    } else {
        /* pgm, epgm, norm, tipc, vmci, inproc...: none has the loopback and key checks above */
        return err_set(err, ERR_SECURITY, "refusing to publish on %s: only tcp:// and ipc:///PATH are allowed",
                       ep);
    }
    return 0;
}
