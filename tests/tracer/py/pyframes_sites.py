# Python call sites without a GPU: this script plays a CUDA program for the tracer's tests
# (tests/tracer/test_pyframes.c). It loads the stand-in libcupti and the tracer through ctypes, calls
# InitializeInjection as the driver would, and makes "blocking CUDA calls" (stand-in host calls)
# from known lines. ctypes releases the GIL around every foreign call, as PyTorch does around its
# syncs, so the tracer reads these frames exactly as it would under PyTorch.
#
# The test finds each call's expected file:line:function by the "# @tag" comments below, and the
# call by its correlation id (corr=). usage: python3 pyframes_sites.py main|threads|late STOPFILE
# ("late" loads no tracer: it waits, making calls, for `synctop attach` to load one, until STOPFILE
# exists.)
import ctypes
import os
import sys
import threading
import time

standin = ctypes.CDLL(os.environ["SYNCTOP_STANDIN"])
standin.standin_run_line.argtypes = [ctypes.c_char_p]
if sys.argv[1] != "late":
    tracer = ctypes.CDLL(os.environ["SYNCTOP_TRACER"])
    if tracer.InitializeInjection() != 1:
        sys.exit("InitializeInjection did not return 1")


# Called directly, a ctypes function adds no Python frame: the line that calls it is the innermost
# frame, as the line calling loss.item() is under PyTorch. The test finds every call's record, so a
# directive the stand-in refused does not go unnoticed.
standin.standin_run_line.restype = ctypes.c_int
run = standin.standin_run_line


def wait_in_function():
    run("call domain=rt cbid=131 wait=500000 corr=1".encode())  # @inner


def caller():
    wait_in_function()  # @caller


class Model:
    def forward(self):
        run("call domain=rt cbid=31 wait=300000 corr=2".encode())  # @method


def generator():
    yield run("call domain=rt cbid=165 wait=200000 corr=3".encode())  # @generator


def far():
    # A call far below the previous instruction's line: the line tables encode a delta this size
    # in several entries (3.10) or as a multi-byte varint (3.11+).
    x = 1
    # padding 1
    # padding 2
    # padding 3
    # padding 4
    # padding 5
    # padding 6
    # padding 7
    # padding 8
    # padding 9
    # padding 10
    # padding 11
    # padding 12
    # padding 13
    # padding 14
    # padding 15
    # padding 16
    # padding 17
    # padding 18
    # padding 19
    # padding 20
    # padding 21
    # padding 22
    # padding 23
    # padding 24
    # padding 25
    # padding 26
    # padding 27
    # padding 28
    # padding 29
    # padding 30
    # padding 31
    # padding 32
    # padding 33
    # padding 34
    # padding 35
    # padding 36
    # padding 37
    # padding 38
    # padding 39
    # padding 40
    # padding 41
    # padding 42
    # padding 43
    # padding 44
    # padding 45
    # padding 46
    # padding 47
    # padding 48
    # padding 49
    # padding 50
    # padding 51
    # padding 52
    # padding 53
    # padding 54
    # padding 55
    # padding 56
    # padding 57
    # padding 58
    # padding 59
    # padding 60
    # padding 61
    # padding 62
    # padding 63
    # padding 64
    # padding 65
    # padding 66
    # padding 67
    # padding 68
    # padding 69
    # padding 70
    # padding 71
    # padding 72
    # padding 73
    # padding 74
    # padding 75
    # padding 76
    # padding 77
    # padding 78
    # padding 79
    # padding 80
    # padding 81
    # padding 82
    # padding 83
    # padding 84
    # padding 85
    # padding 86
    # padding 87
    # padding 88
    # padding 89
    # padding 90
    # padding 91
    # padding 92
    # padding 93
    # padding 94
    # padding 95
    # padding 96
    # padding 97
    # padding 98
    # padding 99
    # padding 100
    # padding 101
    # padding 102
    # padding 103
    # padding 104
    # padding 105
    # padding 106
    # padding 107
    # padding 108
    # padding 109
    # padding 110
    # padding 111
    # padding 112
    # padding 113
    # padding 114
    # padding 115
    # padding 116
    # padding 117
    # padding 118
    # padding 119
    # padding 120
    # padding 121
    # padding 122
    # padding 123
    # padding 124
    # padding 125
    # padding 126
    # padding 127
    # padding 128
    # padding 129
    # padding 130
    # padding 131
    # padding 132
    # padding 133
    # padding 134
    # padding 135
    # padding 136
    # padding 137
    # padding 138
    # padding 139
    # padding 140
    return run("call domain=rt cbid=131 wait=400000 corr=4".encode()) or x  # @far


def worker(name, barrier, corr):
    barrier.wait()
    if name == "a":
        run(f"call domain=rt cbid=131 wait=600000 corr={corr}".encode())  # @thread-a
    else:
        run(f"call domain=rt cbid=131 wait=700000 corr={corr}".encode())  # @thread-b


def main():
    run("context_create 1".encode())
    caller()  # @module-caller
    Model().forward()  # @module-method
    next(generator())  # @module-generator
    far()  # @module-far
    for i in range(3):
        run(f"call domain=rt cbid=131 wait=100000 corr={10 + i}".encode())  # @loop
    run("call domain=rt cbid=131 wait=5 corr=20".encode())  # @quick
    run("poll domain=rt cbid=132 count=50 step=10000 corr=30".encode())  # @poll
    run("context_destroy 1".encode())


def threads():
    run("context_create 1".encode())
    barrier = threading.Barrier(2)
    ts = [threading.Thread(target=worker, args=(n, barrier, c), name="worker-" + n)
          for n, c in (("a", 40), ("b", 50))]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    run("context_destroy 1".encode())


def late_loop(stop):
    corr = 1000
    while not os.path.exists(stop):
        run(f"call domain=rt cbid=131 wait=200000 corr={corr}".encode())  # @late
        run("flush".encode())
        corr += 1
        time.sleep(0.002)


def late():
    ctypes.CDLL(os.environ["SYNCTOP_STANDIN_DRIVER"])  # a CUDA program maps the driver
    run("device id=0 name=FakeH100 cc_major=9 cc_minor=0 sms=132 mem=85899345920".encode())
    run("context_create 1".encode())
    run("context id=1 device=0 nullstream=7".encode())
    print("ready", flush=True)
    late_loop(sys.argv[2])  # @late-caller


{"main": main, "threads": threads, "late": late}[sys.argv[1]]()  # @dispatch
print("script: done")
