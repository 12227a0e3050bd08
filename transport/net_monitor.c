/* A ZeroMQ socket's own events (net_monitor.h). */
#include "net_monitor.h"

#include <stdio.h>
#include <string.h>
#include <zmq.h>

void *net_monitor_open(void *ctx, void *sock, int events) {
    char addr[64];
    snprintf(addr, sizeof addr, "inproc://synctop-monitor-%p", sock);
    if (zmq_socket_monitor(sock, addr, events) != 0)
        return NULL;
    void *mon = zmq_socket(ctx, ZMQ_PAIR);
    if (mon != NULL && zmq_connect(mon, addr) != 0) {
        zmq_close(mon);
        zmq_socket_monitor(sock, NULL, 0);
        mon = NULL;
    }
    return mon;
}

int net_monitor_next(void *mon, uint16_t *event, uint32_t *value, char *ep, size_t eplen) {
    if (mon == NULL)
        return 0;
    zmq_msg_t ev, addr;
    zmq_msg_init(&ev);
    if (zmq_msg_recv(&ev, mon, ZMQ_DONTWAIT) < 0) {
        zmq_msg_close(&ev);
        return 0;
    }
    *event = 0;
    *value = 0;
    if (ep != NULL && eplen > 0)
        ep[0] = '\0';
    if (zmq_msg_size(&ev) >= 6) {
        memcpy(event, zmq_msg_data(&ev), sizeof *event);
        memcpy(value, (const uint8_t *)zmq_msg_data(&ev) + 2, sizeof *value);
    }
    zmq_msg_close(&ev);
    zmq_msg_init(&addr);
    if (zmq_msg_recv(&addr, mon, ZMQ_DONTWAIT) >= 0 && ep != NULL && eplen > 0) {
        size_t n = zmq_msg_size(&addr) < eplen - 1 ? zmq_msg_size(&addr) : eplen - 1;
        memcpy(ep, zmq_msg_data(&addr), n);
        ep[n] = '\0';
    }
    zmq_msg_close(&addr);
    return 1;
}

void net_monitor_close(void *mon, void *sock) {
    if (mon == NULL)
        return;
    zmq_socket_monitor(sock, NULL, 0);
    zmq_close(mon);
}
