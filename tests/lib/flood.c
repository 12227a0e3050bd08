/* Hostile peers for the tests (flood.h). */
#include "flood.h"

#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <zmq.h>

#include "synctop/codec.h"
#include "synctop/net.h"
#include "task.h"

pid_t flood_start(const char *endpoint, flood_kind kind, int n, int done_fd) {
    fflush(NULL);
    pid_t pid = fork();
    if (pid != 0)
        return pid;
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    void *ctx = zmq_ctx_new();
    void *x = zmq_socket(ctx, ZMQ_XSUB);
    if (x == NULL || zmq_connect(x, endpoint) != 0)
        _exit(1);
    static uint8_t sub[1 + 4000];
    size_t len = kind == FLOOD_LONG ? sizeof sub : 1 + 9;
    memset(sub, 'x', sizeof sub);
    sub[0] = 1;
    sub[1] = 'B';
    for (int i = 0; i < n; i++) {
        uint64_t id = 0x5EED000000000000ull + (uint64_t)i;
        memcpy(sub + len - 8, &id, 8); /* distinct in its last bytes */
        (void)zmq_send(x, sub, len, 0);
    }
    (void)!write(done_fd, "d", 1);
    for (;;)
        pause();
}

long flood_rss_kib(pid_t pid) {
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/statm", (int)pid);
    FILE *f = fopen(path, "r");
    long size, resident;
    int ok = f != NULL && fscanf(f, "%ld %ld", &size, &resident) == 2;
    if (f != NULL)
        fclose(f);
    return ok ? resident * (sysconf(_SC_PAGESIZE) / 1024) : -1;
}

uint64_t flood_receive(struct tp_sub *sub, const pid_t *watched, long *peak, int n_watched, const pid_t flooders[2],
                       int done_fd) {
    uint64_t events = 0;
    int done = 0;
    time_t t0 = time(NULL);
    tp_dec d;
    memset(&d, 0, sizeof d);
    err_msg err = {{0}};
    while (!tp_sub_all_ended(sub)) {
        if (time(NULL) - t0 > 100)
            TASK_FAIL_("the healthy subscriber got %" PRIu64 " events in 100 s", events);
        for (int i = 0; i < n_watched; i++) {
            long kib = flood_rss_kib(watched[i]);
            if (kib > peak[i])
                peak[i] = kib;
        }
        char c;
        while (done < 2 && read(done_fd, &c, 1) == 1)
            if (++done == 2)
                for (int i = 0; i < 2; i++)
                    kill(flooders[i], SIGKILL);
        tp_sub_msg m;
        if (tp_sub_recv(sub, &m, 20, &err) != 1)
            continue;
        ASSERT_OK(tp_dec_open(&d, m.data, m.len, &err));
        const tp_record *r;
        while ((r = tp_dec_next_record(&d)) != NULL)
            events += !TP_KIND_IS_META(r->head.kind);
    }
    tp_dec_free(&d);
    for (int i = 0; i < 2; i++) {
        kill(flooders[i], SIGKILL);
        waitpid(flooders[i], NULL, 0);
    }
    return events;
}
