#!/usr/bin/python3
"""tfcheck.py — an independent reader of TensorBoard event files, for tests/test_metrics.c.

    tfcheck.py [--subset] [--restart] FILE.jsonl EVENTFILE [EVENTFILE ...]   prints "ok N" or what is wrong

Reads each event file as TensorFlow's record format — uint64 length, masked CRC-32C of
the length, data, masked CRC-32C of the data — with its own CRC-32C (bitwise, from the
Castagnoli polynomial) and its own protocol-buffer decoder, checks that the first record
of each file is file_version "brain.Event:2", and that the scalars (tag, step) equal the
rows of `tandem metrics --format jsonl` (as float32; loss, loss_u, loss_w, alpha, epochs, val per domain): every row's every tag exactly once
over all the files (with --subset: at most once — a live log killed between a row and its
event may miss that one). With --restart the files are read as TensorBoard reads one run's
files — in the order of their names, and where a tag's step is not past the last one read
for that tag (a later start that went back: a resume with --allow-change from before the
change), the values read before at that step and after are dropped — and what remains is
checked: what TensorBoard shows. It imports nothing of tandem's."""
import json
import struct
import sys


def crc32c(data):
    c = 0xFFFFFFFF
    for b in data:
        c ^= b
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
    return c ^ 0xFFFFFFFF


def masked(data):
    c = crc32c(data)
    return (((c >> 15) | (c << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def varint(buf, i):
    v = s = 0
    while True:
        b = buf[i]
        i += 1
        v |= (b & 0x7F) << s
        s += 7
        if not b & 0x80:
            return v, i


def fields(buf):
    """(field number, wire type, value) of a message, in order."""
    i, out = 0, []
    while i < len(buf):
        key, i = varint(buf, i)
        num, wt = key >> 3, key & 7
        if wt == 0:
            v, i = varint(buf, i)
        elif wt == 1:
            v, i = buf[i:i + 8], i + 8
        elif wt == 5:
            v, i = buf[i:i + 4], i + 4
        elif wt == 2:
            n, i = varint(buf, i)
            v, i = buf[i:i + n], i + n
        else:
            raise ValueError("wire type %d" % wt)
        out.append((num, wt, v))
    if i != len(buf):
        raise ValueError("message overruns")
    return out


def records(path):
    data = open(path, "rb").read()
    i = 0
    while i < len(data):
        if i + 12 > len(data):
            raise ValueError("%s: truncated header at %d" % (path, i))
        head = data[i:i + 8]
        (n,) = struct.unpack("<Q", head)
        (hc,) = struct.unpack("<I", data[i + 8:i + 12])
        if hc != masked(head):
            raise ValueError("%s: length CRC mismatch at %d" % (path, i))
        body = data[i + 12:i + 12 + n]
        (dc,) = struct.unpack("<I", data[i + 12 + n:i + 16 + n])
        if len(body) != n or dc != masked(body):
            raise ValueError("%s: data CRC mismatch at %d" % (path, i))
        yield body
        i += 16 + n


def f32(x):
    return struct.unpack("<f", struct.pack("<f", x))[0]


def main():
    args = sys.argv[1:]
    subset = restart = False
    while args and args[0] in ("--subset", "--restart"):
        subset |= args[0] == "--subset"
        restart |= args[0] == "--restart"
        args = args[1:]
    rows = [json.loads(l) for l in open(args[0])]
    want = {}
    stamp = {}  # (tag, step) -> the row's time: every event of a row carries it
    for r in rows:
        step = r["episode"]
        before = set(want)
        for k in ("lr", "lr_alpha", "grad_norm", "tokens_per_s", "episode_s", "commit_s"):
            want[(k, step)] = r[k]
        for group in ("loss", "loss_u", "loss_w", "alpha", "epochs", "val"):
            for d, v in (r.get(group) or {}).items():
                want[("%s/%s" % (group, d), step)] = v
        for i, v in enumerate(r.get("step_loss") or []):
            want[("train_loss_step", r["step_first"] + i)] = v
        for k in set(want) - before:
            stamp[k] = r["time"]
    got = {}
    last = {}  # tag -> the last step read (--restart)
    paths = args[1:]
    if restart:
        paths = sorted(paths, key=lambda p: p.rsplit("/", 1)[-1])
    for path in paths:
        first = True
        for body in records(path):
            ev = fields(body)
            f = {num: v for num, wt, v in ev}
            if first:
                if f.get(3) != b"brain.Event:2":
                    print("%s: first record is not file_version brain.Event:2" % path)
                    return
                first = False
                continue
            wall = struct.unpack("<d", f[1])[0]
            step = f.get(2, 0)
            for num, wt, summary in ev:
                if num != 5:
                    continue
                for vnum, _, value in fields(summary):
                    if vnum != 1:
                        continue
                    vf = {n: v for n, w, v in fields(value)}
                    tag = vf[1].decode()
                    val = struct.unpack("<f", vf[2])[0]
                    if restart and tag in last and step <= last[tag]:
                        for k in [k for k in got if k[0] == tag and k[1] >= step]:
                            del got[k]
                    if (tag, step) in got:
                        print("twice: %s at step %d" % (tag, step))
                        return
                    got[(tag, step)] = (val, wall)
                    last[tag] = step
    missing = sorted(set(want) - set(got))
    extra = sorted(set(got) - set(want))
    if subset:
        missing = []
    if missing or extra:
        print("missing %s extra %s" % (missing[:5], extra[:5]))
        return
    for k, v in want.items():
        if k in got and got[k][0] != f32(v):
            print("value of %s at step %d: %r != %r" % (k[0], k[1], got[k][0], f32(v)))
            return
    for (tag, step), (val, wall) in got.items():
        if abs(wall - stamp[(tag, step)]) > 1e-3:
            print("wall_time of %s at step %d: %r != %r" % (tag, step, wall, stamp[(tag, step)]))
            return
    print("ok %d" % len(got))


if __name__ == "__main__":
    try:
        main()
    except Exception as x:  # a malformed file is a finding, not a crash of the test
        print("unreadable: %s" % x)
