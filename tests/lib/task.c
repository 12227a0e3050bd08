/*
 * The test runner behind task.h: `test_x` runs every registered case in order; `test_x NAME` runs
 * one; `test_x --list` prints the names.
 */
#include "task.h"

#include <errno.h>
#include <ftw.h>
#include <limits.h>
#include <unistd.h>

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
