#!/usr/bin/env python3
"""What an Nsight Systems export's NVTX_EVENTS table says of the range called NAME (its first, by
start), with the standard library's sqlite3 alone, independently of the importer:

    python3 tests/tmux/nvtx_expected.py EXPORT.sqlite NAME

prints "ranges COUNT", the rows called NAME; "holder NAME DEPTH", the innermost range of its
thread that holds it (the latest start, then the earliest end) and how many hold that one; and
"depths N", the most ranges of its thread that hold any one range of it, + 1."""
import sqlite3
import sys

RANGES = "eventType IN (59, 60, 70, 71) AND \"end\" IS NOT NULL"


def holders(c, rowid, tid, start, end):
    return c.execute(f"SELECT rowid, text, start, \"end\" FROM NVTX_EVENTS WHERE {RANGES} AND globalTid = ? "
                     "AND rowid != ? AND start <= ? AND \"end\" >= ? ORDER BY start DESC, \"end\" ASC",
                     (tid, rowid, start, end)).fetchall()


def main():
    c = sqlite3.connect(sys.argv[1])
    name = sys.argv[2]
    print("ranges", c.execute(f"SELECT count(*) FROM NVTX_EVENTS WHERE {RANGES} AND text = ?", (name,)).fetchone()[0])
    rowid, start, end, tid = c.execute(f"SELECT rowid, start, \"end\", globalTid FROM NVTX_EVENTS WHERE {RANGES} "
                                       "AND text = ? ORDER BY start LIMIT 1", (name,)).fetchone()
    h = holders(c, rowid, tid, start, end)
    if h:
        print("holder", h[0][1], len(holders(c, h[0][0], tid, h[0][2], h[0][3])))
    rows = c.execute(f"SELECT start, \"end\" FROM NVTX_EVENTS WHERE {RANGES} AND globalTid = ?", (tid,)).fetchall()
    deepest = 0
    for i, (s, e) in enumerate(rows):
        held = sum(1 for j, (s2, e2) in enumerate(rows) if j != i and s2 <= s and e2 >= e)
        deepest = max(deepest, held)
    print("depths", deepest + 1)


if __name__ == "__main__":
    main()
