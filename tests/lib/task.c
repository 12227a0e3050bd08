/*
 * The test runner behind task.h: `test_x` runs every registered case in order; `test_x NAME` runs
 * one; `test_x --list` prints the names.
 */
#include "task.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <time.h>
#include <ftw.h>
#include <limits.h>
#include <stdarg.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/file.h>
#include <sys/socket.h>

#define TASK_MAX 512

static struct {
    const char *name;
    task_fn fn;
} tasks[TASK_MAX];
static int n_tasks;
static char tmpdir[PATH_MAX];
static char bindir[PATH_MAX];
static char synctop_path[PATH_MAX];

void task_register(const char *name, task_fn fn) {
    if (n_tasks == TASK_MAX) {
        fprintf(stderr, "too many tests\n");
        exit(2);
    }
    tasks[n_tasks].name = name;
    tasks[n_tasks].fn = fn;
    n_tasks++;
}

const char *task_tmpdir(void) {
    if (tmpdir[0] == '\0') {
        const char *base = getenv("TMPDIR");
        snprintf(tmpdir, sizeof tmpdir, "%s/synctop-test-XXXXXX", base && *base ? base : "/tmp");
        if (mkdtemp(tmpdir) == NULL) {
            fprintf(stderr, "mkdtemp %s: %s\n", tmpdir, strerror(errno));
            exit(2);
        }
    }
    return tmpdir;
}

const char *task_path(const char *name) {
    static char slots[8][PATH_MAX];
    static int next;
    char *p = slots[next++ % 8];
    snprintf(p, PATH_MAX, "%s/%s", task_tmpdir(), name);
    return p;
}

const char *task_bindir(void) { return bindir; }
const char *task_synctop(void) { return synctop_path; }

static int rm_entry(const char *path, const struct stat *sb, int type, struct FTW *ftw) {
    (void)sb;
    (void)type;
    (void)ftw;
    return remove(path);
}

static void cleanup_tmpdir(void) {
    if (tmpdir[0] != '\0' && getenv("SYNCTOP_TEST_KEEP") == NULL)
        nftw(tmpdir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
}

static void set_paths(const char *argv0) {
    char self[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n <= 0)
        snprintf(self, sizeof self, "%s", argv0);
    else
        self[n] = '\0';
    snprintf(bindir, sizeof bindir, "%s", self);
    char *slash = strrchr(bindir, '/');
    if (slash)
        *slash = '\0';
    const char *env = getenv("SYNCTOP_BIN");
    if (env && *env)
        snprintf(synctop_path, sizeof synctop_path, "%s", env);
    else
        snprintf(synctop_path, sizeof synctop_path, "%s/../synctop", bindir);
}

int main(int argc, char **argv) {
    set_paths(argv[0]);
    if (argc > 1 && strcmp(argv[1], "--list") == 0) {
        for (int i = 0; i < n_tasks; i++)
            printf("%s\n", tasks[i].name);
        return 0;
    }
    int ran = 0;
    for (int i = 0; i < n_tasks; i++) {
        if (argc > 1 && strcmp(argv[1], tasks[i].name) != 0)
            continue;
        fprintf(stderr, "-- %s\n", tasks[i].name);
        tasks[i].fn();
        ran++;
    }
    if (ran == 0) {
        fprintf(stderr, "no test named %s\n", argc > 1 ? argv[1] : "(any)");
        return 2;
    }
    cleanup_tmpdir();
    return 0;
}

void task_skip(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "skipped: ");
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n");
    va_end(ap);
    fflush(stderr);
    cleanup_tmpdir();
    exit(77);
}

/* ---- processes ---- */

static pid_t spawned[64];
static size_t n_spawned;

static void kill_spawned(int sig) {
    for (size_t i = 0; i < n_spawned; i++)
        kill(spawned[i], SIGKILL);
    signal(sig, SIG_DFL);
    raise(sig);
}

pid_t task_spawn(const char *const argv[], const char *out_path, const char *err_path) {
    fflush(NULL);
    if (n_spawned == 0)
        signal(SIGABRT, kill_spawned); /* a failed check aborts */
    pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
        int fo = open(out_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        int fe = open(err_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        int fi = open("/dev/null", O_RDONLY);
        if (fo < 0 || fe < 0 || fi < 0 || dup2(fo, 1) < 0 || dup2(fe, 2) < 0 || dup2(fi, 0) < 0)
            _exit(126);
        execv(argv[0], (char *const *)argv);
        _exit(127);
    }
    if (n_spawned < sizeof spawned / sizeof spawned[0])
        spawned[n_spawned++] = pid;
    return pid;
}

void task_sleep_ms(int ms) {
    struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

char *task_slurp(const char *path) {
    FILE *f = fopen(path, "rb");
    ASSERT_NOT_NULL(f);
    size_t cap = 4096, len = 0;
    char *s = malloc(cap);
    ASSERT_NOT_NULL(s);
    size_t n;
    while ((n = fread(s + len, 1, cap - len - 1, f)) > 0) {
        len += n;
        if (cap - len < 2) {
            cap *= 2;
            s = realloc(s, cap);
            ASSERT_NOT_NULL(s);
        }
    }
    fclose(f);
    s[len] = '\0';
    return s;
}

int task_run_synctop(const char *const args[], char **out, char **err, int timeout_s) {
    const char *argv[32] = {task_synctop()};
    int n = 1;
    for (; args[n - 1] != NULL; n++) {
        ASSERT_LT(n, 31);
        argv[n] = args[n - 1];
    }
    argv[n] = NULL;
    char o[PATH_MAX], e[PATH_MAX];
    snprintf(o, sizeof o, "%s", task_path("synctop.out"));
    snprintf(e, sizeof e, "%s", task_path("synctop.err"));
    pid_t pid = task_spawn(argv, o, e);
    int st = task_wait_exit(pid, timeout_s);
    ASSERT_NE(st, -1);
    char *so = task_slurp(o), *se = task_slurp(e);
    if (out)
        *out = so;
    else
        free(so);
    if (err)
        *err = se;
    else
        free(se);
    return st;
}

int task_wait_exit(pid_t pid, int timeout_s) {
    for (int waited = 0; waited <= timeout_s * 100; waited++) {
        int st;
        pid_t r = waitpid(pid, &st, WNOHANG);
        ASSERT_NE(r, -1);
        if (r == pid)
            return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
        task_sleep_ms(10);
    }
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    return -1;
}

/* A port is this test's while it holds an flock on a file named after it (released when the
 * process ends, however it ends): two tests running at once never get the same port, even when one
 * has closed it to bind it again after a restart. The kernel hands out no port below its ephemeral
 * range by itself, so only another test could have taken it. */
static int port_reserve(int port) {
    char path[64];
    snprintf(path, sizeof path, "/tmp/synctop-test-port-%d.lock", port);
    int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0666);
    if (fd < 0)
        return -1; /* another user's: theirs */
    if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

int task_free_port(void) {
    for (unsigned i = 0; i < 2000; i++) {
        int port = 20000 + (int)(((unsigned)getpid() * 7919u + i * 104729u) % 10000u);
        int lock = port_reserve(port);
        if (lock < 0)
            continue;
        int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0) {
            close(lock);
            return 0;
        }
        struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port),
                                 .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
        int ok = bind(fd, (const struct sockaddr *)&sa, sizeof sa) == 0;
        close(fd);
        if (ok)
            return port; /* the lock stays held until this process ends */
        close(lock);
    }
    return 0;
}
