/*
 * simdjson's On-Demand API against synctop's own Kineto reader, on the same inputs at the same
 * moment. For each trace, the On-Demand walk reads every traceEvents entry's fields that the
 * importer reads (ph, cat, name, pid, tid, ts and dur as exact decimals in ns, and in args device,
 * stream, correlation, cbid, bytes, context, grid, block, cuda_sync_kind, wait_on_cuda_event_id,
 * name, fromDevice, toDevice, graph id, Call stack) and the top level's (baseTimeNanoseconds,
 * hostname, distributedInfo, deviceProperties), summing them so that nothing is optimised away.
 * The import is kineto_import_mem into a sink: the whole import, records sorted and encoded, so its
 * figure bounds what the lexer alone costs from above. Runs of the two alternate, so that load on
 * the machine falls on both alike. A gzip input is inflated by zlib into memory for simdjson (timed
 * apart, and added); the importer inflates it as it reads. Then each reader reads the file in a
 * process of its own, which prints its peak resident memory: On-Demand holds the whole text, the
 * importer streams it.
 *
 *   bench_simdjson [--runs N] [FILE...]   (.json or .json.gz; none: the four large real traces
 *                                          in KINETO_TRACE_DIR, inflated to /tmp and as shipped)
 *   bench_simdjson --rss simdjson|import FILE   (what the memory figures run)
 */
#include <simdjson.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include <spawn.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <zlib.h>

extern "C" {
#include "child_rss.h"
#include "kineto.h"
}

using namespace simdjson;

static double now_s() {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

[[noreturn]] static void die(const char *what, const char *detail = "") {
    fprintf(stderr, "bench_simdjson: %s%s\n", what, detail);
    exit(1);
}

/* ------------------------------------------------------------------------------------------ */
/* Input                                                                                      */
/* ------------------------------------------------------------------------------------------ */

/* A text with SIMDJSON_PADDING readable bytes after its end, as On-Demand needs. */
struct padded {
    char *data = nullptr;
    size_t len = 0, cap = 0;
    ~padded() { free(data); }
    void reserve(size_t n) {
        if (n + SIMDJSON_PADDING <= cap)
            return;
        size_t want = std::max(n + SIMDJSON_PADDING, cap * 2);
        char *p = (char *)realloc(data, want);
        if (p == nullptr)
            die("out of memory");
        data = p;
        cap = want;
    }
    void append(const void *s, size_t n) {
        reserve(len + n);
        memcpy(data + len, s, n);
        len += n;
    }
    padded_string_view view() const {
        memset(data + len, 0, SIMDJSON_PADDING);
        return padded_string_view(data, len, len + SIMDJSON_PADDING);
    }
};

static bool is_gzip(const std::vector<uint8_t> &b) { return b.size() >= 2 && b[0] == 0x1f && b[1] == 0x8b; }

static std::vector<uint8_t> read_file(const char *path) {
    FILE *f = fopen(path, "rb");
    if (f == nullptr)
        die("cannot open ", path);
    std::vector<uint8_t> b;
    uint8_t chunk[1 << 16];
    size_t n;
    while ((n = fread(chunk, 1, sizeof chunk, f)) > 0)
        b.insert(b.end(), chunk, chunk + n);
    fclose(f);
    return b;
}

/* Inflates a gzip image into out (its room kept from a run before). */
static void inflate_mem(const std::vector<uint8_t> &gz, padded &out) {
    z_stream zs;
    memset(&zs, 0, sizeof zs);
    if (inflateInit2(&zs, 16 + MAX_WBITS) != Z_OK)
        die("inflateInit2");
    out.len = 0;
    zs.next_in = (Bytef *)gz.data();
    zs.avail_in = (uInt)gz.size();
    int rc = Z_OK;
    while (rc != Z_STREAM_END) {
        out.reserve(out.len + (1u << 20));
        zs.next_out = (Bytef *)out.data + out.len;
        zs.avail_out = (uInt)(out.cap - SIMDJSON_PADDING - out.len);
        size_t room = zs.avail_out;
        rc = inflate(&zs, Z_NO_FLUSH);
        out.len += room - zs.avail_out;
        if (rc != Z_OK && rc != Z_STREAM_END)
            die("a damaged gzip stream");
    }
    inflateEnd(&zs);
}

/* ------------------------------------------------------------------------------------------ */
/* The On-Demand walk                                                                         */
/* ------------------------------------------------------------------------------------------ */

/* What the walk read, summed. */
struct tally {
    uint64_t entries = 0, sum = 0, bad_numbers = 0;
};

/* The text of a number as the importer keeps it: raw_json_token runs on to the next token. */
static std::string_view text_trim(std::string_view s) {
    while (!s.empty() && (s.back() == ' ' || s.back() == '\n' || s.back() == '\r' || s.back() == '\t'))
        s.remove_suffix(1);
    return s;
}

/* The JSON number s times 10^scale as an int64, exactly: digits dropped round half away from
 * zero. Returns false when s is not a number or the result does not fit. */
static bool dec_scaled(std::string_view s, int scale, int64_t *out) {
    size_t i = 0, n = s.size();
    bool neg = i < n && s[i] == '-';
    i += neg;
    uint64_t mant = 0;
    int exp10 = 0, digits = 0, first_dropped = -1;
    auto digit = [&](unsigned d, bool frac) {
        if (mant == 0 && d == 0) {
            exp10 -= frac;
            return;
        }
        if (digits < 19) {
            mant = mant * 10 + d;
            digits++;
            exp10 -= frac;
        } else {
            if (first_dropped < 0)
                first_dropped = (int)d;
            exp10 += !frac;
        }
    };
    size_t start = i;
    for (; i < n && s[i] >= '0' && s[i] <= '9'; i++)
        digit((unsigned)(s[i] - '0'), false);
    if (i == start)
        return false;
    if (i < n && s[i] == '.') {
        size_t f = ++i;
        for (; i < n && s[i] >= '0' && s[i] <= '9'; i++)
            digit((unsigned)(s[i] - '0'), true);
        if (i == f)
            return false;
    }
    if (i < n && (s[i] == 'e' || s[i] == 'E')) {
        bool eneg = ++i < n && s[i] == '-';
        if (i < n && (s[i] == '-' || s[i] == '+'))
            i++;
        int e = 0;
        size_t f = i;
        for (; i < n && s[i] >= '0' && s[i] <= '9'; i++)
            e = e < 100000 ? e * 10 + (s[i] - '0') : e;
        if (i == f)
            return false;
        exp10 += eneg ? -e : e;
    }
    if (i != n)
        return false;
    exp10 += scale;
    if (exp10 >= 0) {
        mant += first_dropped >= 5;
        for (; exp10 > 0 && mant != 0; exp10--) {
            if (mant > (uint64_t)INT64_MAX / 10)
                return false;
            mant *= 10;
        }
    } else {
        bool round_up = false;
        for (; exp10 < 0 && mant != 0; exp10++) {
            round_up = mant % 10 >= 5;
            mant /= 10;
        }
        mant += round_up;
    }
    if (mant > (uint64_t)INT64_MAX)
        return false;
    *out = neg ? -(int64_t)mant : (int64_t)mant;
    return true;
}

/* The length of a key from its raw text (just after the opening quote) to its closing quote. */
static std::string_view key_of(ondemand::field &f) {
    const char *r = f.key().raw();
    const char *q = (const char *)memchr(r, '"', 1u << 20);
    return std::string_view(r, q ? (size_t)(q - r) : 0);
}

/* An integer the importer reads exactly (a number; pid and tid also a string of digits). */
static void take_int(ondemand::value v, tally &t, bool digits_string) {
    int64_t x;
    if (v.get_int64().get(x) == SUCCESS) {
        t.sum += (uint64_t)x;
        return;
    }
    std::string_view s;
    if (v.type() == ondemand::json_type::number)
        s = text_trim(v.raw_json_token());
    else if (!digits_string || v.get_string().get(s) != SUCCESS)
        return;
    if (dec_scaled(s, 0, &x))
        t.sum += (uint64_t)x;
    else
        t.bad_numbers++;
}

static void take_decimal_ns(ondemand::value v, tally &t) {
    int64_t x;
    if (v.type() == ondemand::json_type::number && dec_scaled(text_trim(v.raw_json_token()), 3, &x))
        t.sum += (uint64_t)x;
    else
        t.bad_numbers++;
}

static void take_string(ondemand::value v, tally &t) {
    std::string_view s;
    if (v.get_string().get(s) == SUCCESS)
        t.sum += s.size() + (s.empty() ? 0 : (uint8_t)s[0]);
}

static void take_dims(ondemand::value v, tally &t) {
    ondemand::array a;
    if (v.get_array().get(a) != SUCCESS)
        return;
    for (auto x : a) {
        int64_t d;
        if (x.get_int64().get(d) == SUCCESS)
            t.sum += (uint64_t)d;
    }
}

static void walk_args(ondemand::value v, tally &t) {
    ondemand::object o;
    if (v.get_object().get(o) != SUCCESS)
        return;
    for (auto f : o) {
        std::string_view k = key_of(f.value_unsafe());
        ondemand::value x = f.value_unsafe().value();
        if (k == "device" || k == "stream" || k == "correlation" || k == "cbid" || k == "bytes" ||
            k == "context" || k == "wait_on_cuda_event_id" || k == "fromDevice" || k == "toDevice" ||
            k == "graph id")
            take_int(x, t, false);
        else if (k == "grid" || k == "block")
            take_dims(x, t);
        else if (k == "cuda_sync_kind" || k == "name" || k == "Call stack")
            take_string(x, t);
    }
}

static void walk_event(ondemand::value v, tally &t) {
    t.entries++;
    ondemand::object o;
    if (v.get_object().get(o) != SUCCESS)
        return;
    for (auto f : o) {
        std::string_view k = key_of(f.value_unsafe());
        ondemand::value x = f.value_unsafe().value();
        switch (k.size()) {
        case 2:
            if (k == "ph")
                take_string(x, t);
            else if (k == "ts")
                take_decimal_ns(x, t);
            break;
        case 3:
            if (k == "cat")
                take_string(x, t);
            else if (k == "pid" || k == "tid")
                take_int(x, t, true);
            else if (k == "dur")
                take_decimal_ns(x, t);
            break;
        case 4:
            if (k == "name")
                take_string(x, t);
            else if (k == "args")
                walk_args(x, t);
            break;
        default: break;
        }
    }
}

static void walk_object_ints(ondemand::value v, tally &t) {
    ondemand::object o;
    if (v.get_object().get(o) != SUCCESS)
        return;
    for (auto f : o) {
        std::string_view k = key_of(f.value_unsafe());
        if (k == "name")
            take_string(f.value_unsafe().value(), t);
        else
            take_int(f.value_unsafe().value(), t, false);
    }
}

/* Walks a whole trace; the tally, or the first error. */
static error_code walk(ondemand::parser &parser, padded_string_view text, tally &t) {
    ondemand::document doc;
    ondemand::object top;
    error_code e = parser.iterate(text).get(doc);
    if (e == SUCCESS)
        e = doc.get_object().get(top);
    if (e != SUCCESS)
        return e;
    for (auto f : top) {
        if (f.error() != SUCCESS)
            return f.error();
        std::string_view k = key_of(f.value_unsafe());
        ondemand::value x = f.value_unsafe().value();
        if (k == "traceEvents") {
            ondemand::array a;
            if ((e = x.get_array().get(a)) != SUCCESS)
                return e;
            for (auto ev : a) {
                if (ev.error() != SUCCESS)
                    return ev.error();
                walk_event(ev.value_unsafe(), t);
            }
        } else if (k == "deviceProperties") {
            ondemand::array a;
            if (x.get_array().get(a) == SUCCESS)
                for (auto d : a)
                    walk_object_ints(d.value_unsafe(), t);
        } else if (k == "distributedInfo") {
            walk_object_ints(x, t);
        } else if (k == "baseTimeNanoseconds") {
            take_int(x, t, false);
        } else if (k == "hostname") {
            take_string(x, t);
        }
    }
    return SUCCESS;
}

/* ------------------------------------------------------------------------------------------ */
/* Timing and memory                                                                          */
/* ------------------------------------------------------------------------------------------ */

static int to_sink(void *ctx, const void *batch, size_t len, err_msg *err) {
    (void)batch;
    (void)err;
    *(uint64_t *)ctx += len;
    return 0;
}

static double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
}

/* --rss: reads path the way one reader must and prints "<peak RSS KiB> <RSS KiB before> <JSON bytes>". */
static int rss_child(const char *how, const char *path) {
    uint64_t before = bench_peak_rss_kib(), json = 0;
    if (strcmp(how, "import") == 0) {
        import_stats st;
        err_msg err = {{0}};
        uint64_t sink = 0;
        if (kineto_import(path, nullptr, to_sink, &sink, &st, &err) != 0)
            die(err.msg);
        json = st.json_bytes;
    } else {
        /* On-Demand needs the whole text: read (inflated) straight into one padded buffer */
        gzFile z = gzopen(path, "rb");
        if (z == nullptr)
            die("cannot open ", path);
        gzbuffer(z, 1u << 17);
        padded text;
        for (;;) {
            text.reserve(text.len + (4u << 20));
            int n = gzread(z, text.data + text.len, (unsigned)(text.cap - SIMDJSON_PADDING - text.len));
            if (n < 0)
                die("cannot read ", path);
            if (n == 0)
                break;
            text.len += (size_t)n;
        }
        gzclose(z);
        ondemand::parser parser;
        tally t;
        error_code e = walk(parser, text.view(), t);
        if (e != SUCCESS)
            die("simdjson: ", error_message(e));
        json = text.len;
    }
    printf("%llu %llu %llu\n", (unsigned long long)bench_peak_rss_kib(), (unsigned long long)before,
           (unsigned long long)json);
    return 0;
}

/* Runs this program with --rss how path: its peak RSS in MiB. */
static double rss_of(const char *self, const char *how, const char *path) {
    char *args[] = {(char *)self, (char *)"--rss", (char *)how, (char *)path, nullptr};
    char line[256];
    int rc = bench_child_line(args, line, sizeof line);
    unsigned long long peak = 0, before = 0, json = 0;
    if (rc != 0 || sscanf(line, "%llu %llu %llu", &peak, &before, &json) != 3)
        die("--rss failed on ", path);
    return (double)peak / 1024.0;
}

/* Times both readers on one file, runs times each, alternating; prints one row. */
static void bench_file(const char *self, const char *path, int runs) {
    std::vector<uint8_t> input = read_file(path);
    bool gz = is_gzip(input);
    padded text;
    if (gz)
        inflate_mem(input, text);
    else
        text.append(input.data(), input.size());
    ondemand::parser parser;
    std::vector<double> t_walk, t_inflate, t_sj, t_imp;
    tally t;
    import_stats st;
    for (int r = 0; r < runs; r++) {
        double t0 = now_s();
        if (gz)
            inflate_mem(input, text);
        double t1 = now_s();
        t = tally();
        error_code e = walk(parser, text.view(), t);
        double t2 = now_s();
        if (e != SUCCESS)
            die("simdjson: ", error_message(e));
        err_msg err = {{0}};
        uint64_t sink = 0;
        if (kineto_import_mem(input.data(), input.size(), path, nullptr, to_sink, &sink, &st, &err) != 0)
            die(err.msg);
        double t3 = now_s();
        t_inflate.push_back(t1 - t0);
        t_walk.push_back(t2 - t1);
        t_sj.push_back(t2 - t0);
        t_imp.push_back(t3 - t2);
    }
    if (t.entries != st.entries)
        fprintf(stderr, "bench_simdjson: %s: %llu entries for simdjson, %llu for the importer\n", path,
                (unsigned long long)t.entries, (unsigned long long)st.entries);
    double mb = (double)text.len / 1e6;
    const char *base = strrchr(path, '/') ? strrchr(path, '/') + 1 : path;
    double rss_sj = rss_of(self, "simdjson", path), rss_imp = rss_of(self, "import", path);
    printf("%-36s %7.1f MB  simdjson %7.1f MB/s", base, mb, mb / median(t_sj));
    if (gz)
        printf(" (zlib %6.1f + walk %7.1f)", mb / median(t_inflate), mb / median(t_walk));
    else
        printf("%29s", "");
    printf("  import %6.1f MB/s  ratio %4.2f  peak RSS simdjson %7.1f MiB, import %6.1f MiB  (%llu entries, sum "
           "%llx)\n",
           mb / median(t_imp), median(t_imp) / median(t_sj), rss_sj, rss_imp, (unsigned long long)t.entries,
           (unsigned long long)t.sum);
    fflush(stdout);
}

int main(int argc, char **argv) {
    if (argc == 4 && strcmp(argv[1], "--rss") == 0)
        return rss_child(argv[2], argv[3]);
    int runs = 5, first = 1;
    if (argc > 2 && strcmp(argv[1], "--runs") == 0) {
        runs = atoi(argv[2]);
        first = 3;
    }
    if (runs < 1)
        die("usage: bench_simdjson [--runs N] [FILE...]");
    char self[4096];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n <= 0)
        die("cannot find /proc/self/exe");
    self[n] = '\0';
    printf("simdjson %d.%d.%d, %s kernel for On-Demand; median of %d runs each, alternating; MB/s of JSON "
           "text; ratio: import time / simdjson time\n",
           int(SIMDJSON_VERSION_MAJOR), int(SIMDJSON_VERSION_MINOR), int(SIMDJSON_VERSION_REVISION),
           SIMDJSON_STRINGIFY(SIMDJSON_BUILTIN_IMPLEMENTATION), runs);
    if (first < argc) {
        for (int i = first; i < argc; i++)
            bench_file(self, argv[i], runs);
        return 0;
    }
    static const char *const real[] = {"qwen_h100_with_stack", "qwen_mi300_rocm_with_stack",
                                       "resnet_2080ti_two_threads", "resnet50_v100_legacy_2021"};
    for (const char *r : real) {
        std::string gz = std::string(KINETO_TRACE_DIR) + "/" + r + ".json.gz";
        std::string plain = "/tmp/bench_simdjson-" + std::to_string(getpid()) + "-" + r + ".json";
        padded text;
        inflate_mem(read_file(gz.c_str()), text);
        FILE *f = fopen(plain.c_str(), "wb");
        if (f == nullptr || fwrite(text.data, 1, text.len, f) != text.len || fclose(f) != 0)
            die("cannot write ", plain.c_str());
        bench_file(self, plain.c_str(), runs);
        bench_file(self, gz.c_str(), runs);
        unlink(plain.c_str());
    }
    return 0;
}
